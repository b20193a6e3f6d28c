//go:build !js

package browser

// The helper's files stream (FilesStreamKind): the live view's way to put a file a person
// uploads into the sandbox (a path the agent's Chromium can read, for DOM.setFileInputFiles)
// and to read a finished download back out of ~/Downloads. One request per stream:
//
//	request: op u8, then
//	  1 put:  name str, size u64, then size bytes   → ok: path str (the file's path in the sandbox)
//	  2 get:  name str                              → ok: size u64, then size bytes
//	  3 dirs: —                                     → ok: downloads dir str (created)
//	reply:   status u8 (0 ok, 1 error), then the op's fields, or message str
//
// str is a u16 length then bytes; integers are big-endian. Names are file names only (no
// directories). The helper runs in the agent's sandbox: the gateway bounds every size it
// reads from this stream.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/porthole/porthole/internal/wire"
)

// FilesStreamKind is the helper stream of the live view's uploads and downloads.
const FilesStreamKind = "browser-files"

// Files stream ops and limits.
const (
	filesPut  = 1
	filesGet  = 2
	filesDirs = 3

	maxUploadDirs = 16      // upload directories kept in the sandbox (oldest removed)
	MaxDownload   = 4 << 30 // bytes of a download read back to a viewer's device
)

// ServeFilesStream serves one files request inside the agent's sandbox.
func ServeFilesStream(ctx context.Context, stream net.Conn) {
	defer stream.Close()
	stop := context.AfterFunc(ctx, func() { stream.Close() })
	defer stop()
	stream.SetDeadline(time.Now().Add(10 * time.Minute))
	if err := serveFiles(stream); err != nil {
		writeFilesErr(stream, err)
	}
}

func serveFiles(stream net.Conn) error {
	var op [1]byte
	if _, err := io.ReadFull(stream, op[:]); err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	switch op[0] {
	case filesPut:
		name, err := readFilesName(stream)
		if err != nil {
			return err
		}
		var size uint64
		if err := binary.Read(stream, binary.BigEndian, &size); err != nil {
			return fmt.Errorf("read the size: %w", err)
		}
		if size > MaxUpload {
			return fmt.Errorf("a file of %d bytes is over the %d-byte upload limit", size, MaxUpload)
		}
		path, err := putUpload(name, io.LimitReader(stream, int64(size)), int64(size))
		if err != nil {
			return err
		}
		return writeFilesOK(stream, wire.AppendStr(nil, path))
	case filesGet:
		name, err := readFilesName(stream)
		if err != nil {
			return err
		}
		dir, err := downloadsDirLocal()
		if err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("open the download: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a downloaded file", name)
		}
		if fi.Size() > MaxDownload {
			return fmt.Errorf("%s is over the %d-byte limit", name, int64(MaxDownload))
		}
		if err := writeFilesOK(stream, binary.BigEndian.AppendUint64(nil, uint64(fi.Size()))); err != nil {
			return nil
		}
		io.CopyN(stream, f, fi.Size())
		return nil
	case filesDirs:
		dir, err := downloadsDirLocal()
		if err != nil {
			return err
		}
		return writeFilesOK(stream, wire.AppendStr(nil, dir))
	}
	return fmt.Errorf("unknown files op %d", op[0])
}

// validFileName accepts a plain file name: no directories, no NUL, not . or .., ≤ 255 bytes.
func validFileName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q is not a file name", name)
	}
	return nil
}

func readFilesName(r io.Reader) (string, error) {
	var n uint16
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return "", fmt.Errorf("read the name: %w", err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("read the name: %w", err)
	}
	return string(b), validFileName(string(b))
}

func writeFilesOK(w io.Writer, fields []byte) error {
	_, err := w.Write(append([]byte{0}, fields...))
	return err
}

func writeFilesErr(w io.Writer, err error) {
	w.Write(wire.AppendStr([]byte{1}, err.Error()))
}

// downloadsDirLocal is ~/Downloads in the sandbox, created if needed.
func downloadsDirLocal() (string, error) {
	home := os.Getenv("HOME")
	if home == "" {
		home = "/home/agent"
	}
	dir := filepath.Join(home, "Downloads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make the downloads folder: %w", err)
	}
	return dir, nil
}

// putUpload writes an upload into a new directory of its own under the sandbox's temporary
// directory (Chromium reads it when the page uses the file, so it stays; the oldest of more
// than maxUploadDirs are removed).
func putUpload(name string, r io.Reader, size int64) (string, error) {
	root := filepath.Join(os.TempDir(), "porthole-uploads")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("make the uploads folder: %w", err)
	}
	pruneUploads(root)
	dir, err := os.MkdirTemp(root, "u-")
	if err != nil {
		return "", fmt.Errorf("make an upload folder: %w", err)
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create the upload: %w", err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = errors.New("the upload ended early")
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write the upload: %w", err)
	}
	return path, nil
}

func pruneUploads(root string) {
	ents, err := os.ReadDir(root)
	if err != nil || len(ents) < maxUploadDirs {
		return
	}
	type dirAge struct {
		name string
		mod  time.Time
	}
	var ds []dirAge
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			ds = append(ds, dirAge{e.Name(), fi.ModTime()})
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].mod.Before(ds[j].mod) })
	for _, d := range ds[:len(ds)-maxUploadDirs+1] {
		os.RemoveAll(filepath.Join(root, d.name))
	}
}
