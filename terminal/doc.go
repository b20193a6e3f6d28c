// Package terminal is the terminal surface: PTYs in the helper, scrollback and fan-out in the gateway, and its wire messages.
package terminal
