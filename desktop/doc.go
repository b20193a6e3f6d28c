// Package desktop is the desktop surface: an X display inside the agent's sandbox, captured and encoded once by the helper, fanned out to viewers by the gateway, and driven by people and by the agent's computer-use API.
package desktop
