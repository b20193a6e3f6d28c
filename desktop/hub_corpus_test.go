//go:build !js

package desktop

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteHelperStreamCorpus rewrites testdata/fuzz/FuzzHelperStream from
// helperStreamSeeds when DESKTOP_WRITE_CORPUS=1; otherwise it checks the files exist.
func TestWriteHelperStreamCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzHelperStream")
	seeds := helperStreamSeeds()
	if os.Getenv("DESKTOP_WRITE_CORPUS") == "1" {
		os.MkdirAll(dir, 0o755)
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range seeds {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("seed-%02d", i))); err != nil {
			t.Errorf("seed corpus: %v (run with DESKTOP_WRITE_CORPUS=1)", err)
		}
	}
}
