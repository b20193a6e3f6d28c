// Package browser is the browser surface: one Chromium per agent inside the agent's sandbox, driven over CDP through a pipe carried on one helper stream, multiplexed by the gateway for people's live view and the agent's own automation.
package browser
