//go:build wasm

package app

func newLocalResourceResolver(directory string) localResourceResolver {
	return localResourceResolver{directory: directory}
}

type localResourceResolver struct {
	directory string
}
