//go:build !wasm

package app

import "net/http"

func newLocalResourceResolver(directory string) localResourceResolver {
	return localResourceResolver{Handler: http.FileServer(http.Dir(directory)), directory: directory}
}

type localResourceResolver struct {
	http.Handler
	directory string
}
