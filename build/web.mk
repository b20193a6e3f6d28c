# build/web.mk — the web app (included by the Makefile).
#
# `make web` builds the client-only WASM main, copies the static files and xterm.js, and runs
# app/cmd/gen, which draws the icons, precompresses app.wasm (brotli best quality, gzip), pre-renders
# the go-app shell (index.html, app.js, manifest, service worker) into assets/web and prints
# app.wasm's transferred size. assets embeds that tree: run `web` before building or testing
# anything that serves the app (`build` and `test` do).

# WASM_GCFLAGS: compiler flags for app.wasm. The default, no inlining (all=-l), makes the module
# 2% bigger raw but 10% smaller compressed (measured with the dashboard: raw 8.24 MB, gzip 1.80 MB,
# brotli 1.26 MB, against 8.11 / 2.00 / 1.41 MB inlined) and no slower to become interactive:
# see docs/app.md. `make web WASM_GCFLAGS=` builds with inlining.
WASM_GCFLAGS ?= all=-l

WEB_OUT     := assets/web
WEB_DIR     := $(WEB_OUT)/web
XTERM_FILES := node_modules/@xterm/xterm/lib/xterm.js \
               node_modules/@xterm/xterm/css/xterm.css \
               node_modules/@xterm/addon-fit/lib/addon-fit.js \
               node_modules/@xterm/addon-webgl/lib/addon-webgl.js \
               node_modules/@xterm/addon-search/lib/addon-search.js

web: ## Build the web app into assets/web (app.wasm + .br/.gz, shell, icons, xterm.js); prints app.wasm's size.
	@test -f node_modules/@xterm/xterm/lib/xterm.js || npm ci --no-audit --no-fund
	@mkdir -p $(WEB_DIR)
	@find $(WEB_DIR) -mindepth 1 -not -name 'app.wasm*' -delete
	GOOS=js GOARCH=wasm go build -trimpath -ldflags='-s -w' $(if $(WASM_GCFLAGS),-gcflags='$(WASM_GCFLAGS)') -o $(WEB_DIR)/app.wasm ./app/cmd/wasm
	cp -R assets/static/. $(WEB_DIR)/
	@mkdir -p $(WEB_DIR)/xterm
	cp $(XTERM_FILES) $(WEB_DIR)/xterm/
	go run ./app/cmd/gen -out $(WEB_OUT)

web-clean: ## Remove the generated web app (assets/web keeps only .keep).
	find $(WEB_OUT) -mindepth 1 -not -name .keep -delete

.PHONY: web web-clean
