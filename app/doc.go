// Package app is Porthole's web app: go-app components for the PWA shell, compiled to WASM and pre-rendered at build time.
package app
