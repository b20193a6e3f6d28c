//go:build !js

package browser

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"path"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/wire"
)

// The gateway's half of uploads (a file chooser's files, from the viewer's device into the
// sandbox) and downloads (from the sandbox's ~/Downloads to the viewer's device), over the
// helper's files stream (helper_files.go).

const filesTimeout = 2 * time.Minute

// upload is one viewer's files for the open file chooser: the file being received (its
// stream into the sandbox) and the sandbox paths of those done. Owned by the viewer's reader.
type upload struct {
	conn      net.Conn
	w         *bufio.Writer
	name      string
	remaining uint64
	paths     []string
}

func (u *upload) abort() {
	if u.conn != nil {
		u.conn.Close()
		u.conn, u.w = nil, nil
	}
}

// openFiles opens the agent's files stream.
func (h *viewHub) openFiles(ctx context.Context) (net.Conn, error) {
	if h.s.openFiles == nil {
		return nil, errors.New("file transfer is not available")
	}
	c, err := h.s.openFiles(ctx, h.agent)
	if err != nil {
		return nil, fmt.Errorf("open the files stream: %w", err)
	}
	c.SetDeadline(time.Now().Add(filesTimeout))
	return c, nil
}

// readFilesReply reads a reply's status; an error status becomes an error with its message.
func readFilesReply(r io.Reader) error {
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		return fmt.Errorf("read the helper's reply: %w", err)
	}
	if st[0] == 0 {
		return nil
	}
	msg, err := readFilesStr(r)
	if err != nil {
		return err
	}
	return fmt.Errorf("the sandbox refused: %s", msg)
}

func readFilesStr(r io.Reader) (string, error) {
	var n uint16
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return "", fmt.Errorf("read the helper's reply: %w", err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("read the helper's reply: %w", err)
	}
	if !utf8.Valid(b) {
		return "", errors.New("the helper's reply is not UTF-8")
	}
	return string(b), nil
}

// downloadsDir asks the helper for the sandbox's downloads folder (created).
func (h *viewHub) downloadsDir(ctx context.Context) (string, error) {
	c, err := h.openFiles(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.Write([]byte{filesDirs}); err != nil {
		return "", fmt.Errorf("ask for the downloads folder: %w", err)
	}
	if err := readFilesReply(c); err != nil {
		return "", err
	}
	return readFilesStr(c)
}

// upload handles FileBegin, FileData and FileDone of the control holder.
func (h *viewHub) upload(ctx context.Context, s *viewSession, session string, m Message) error {
	h.mu.Lock()
	ch := h.chooser
	h.mu.Unlock()
	if ch == nil {
		if s.up != nil {
			s.up.abort()
			s.up = nil
		}
		return errors.New("no file chooser is open")
	}
	if s.up == nil {
		s.up = &upload{}
	}
	u := s.up
	fail := func(err error) error {
		u.abort()
		s.up = nil
		return err
	}
	switch m := m.(type) {
	case FileBegin:
		if u.conn != nil {
			return fail(errors.New("a file began before the previous one ended"))
		}
		if len(u.paths) >= MaxFiles || !ch.multiple && len(u.paths) >= 1 {
			return fail(fmt.Errorf("too many files for this chooser"))
		}
		name := path.Base("/" + m.Name)
		if validFileName(name) != nil {
			return fail(fmt.Errorf("%q is not a file name", m.Name))
		}
		// The stream outlives this message: opened on the hub's context, not the command's
		// (a stream may end with the context it was opened with).
		c, err := h.openFiles(h.ctx)
		if err != nil {
			return fail(err)
		}
		u.conn, u.w, u.name, u.remaining = c, bufio.NewWriterSize(c, 64<<10), name, uint64(m.Size)
		hdr := wire.AppendStr([]byte{filesPut}, name)
		u.w.Write(binary.BigEndian.AppendUint64(hdr, uint64(m.Size)))
		if m.Size == 0 {
			return h.endFile(s)
		}
	case FileData:
		if u.conn == nil {
			return fail(errors.New("file data without a FileBegin"))
		}
		if uint64(len(m.Data)) > u.remaining {
			return fail(fmt.Errorf("%s: more bytes than announced", u.name))
		}
		if _, err := u.w.Write(m.Data); err != nil {
			return fail(fmt.Errorf("upload %s: %w", u.name, err))
		}
		if u.remaining -= uint64(len(m.Data)); u.remaining == 0 {
			return h.endFile(s)
		}
	case FileDone:
		if u.conn != nil {
			return fail(errors.New("FileDone in the middle of a file"))
		}
		s.up = nil
		h.mu.Lock()
		if h.chooser == ch {
			h.chooser = nil
			closed := Encode(FileChooser{})
			for _, x := range h.sessions {
				if x.mode == ModeDrive {
					x.chooser = closed
					x.wakeup()
				}
			}
		}
		h.mu.Unlock()
		if m.Cancel || len(u.paths) == 0 {
			return nil // an intercepted chooser nobody answers stays empty
		}
		if err := h.cdp.call(ctx, session, "DOM.setFileInputFiles", map[string]any{
			"files": u.paths, "backendNodeId": ch.backendNodeID}, nil); err != nil {
			return fmt.Errorf("give the page its files: %w", err)
		}
		h.log.Info("browser upload", "viewer", s.v.ID, "files", len(u.paths))
		if h.s.cfg.OnCall != nil {
			h.s.cfg.OnCall(h.agent, s.v, "upload", fmt.Sprintf("%d files", len(u.paths)))
		}
	}
	return nil
}

// endFile finishes the file being sent: the helper answers its path in the sandbox.
func (h *viewHub) endFile(s *viewSession) error {
	u := s.up
	defer u.abort()
	err := u.w.Flush()
	if err == nil {
		err = readFilesReply(u.conn)
	}
	var p string
	if err == nil {
		p, err = readFilesStr(u.conn)
	}
	if err != nil {
		s.up = nil
		return fmt.Errorf("upload %s: %w", u.name, err)
	}
	u.paths = append(u.paths, p)
	return nil
}

// serveDownload sends a finished download (?id=<download id>) to the viewer's device.
func (s *Service) serveDownload(w http.ResponseWriter, r *http.Request, agent api.Agent, v Viewer) {
	id := r.URL.Query().Get("id")
	h, _ := s.hubs.Get(agent.ID)
	name := ""
	if h != nil {
		h.mu.Lock()
		for _, d := range h.downloads {
			if d.ID == id && d.State == DownloadCompleted {
				name = d.Name
			}
		}
		h.mu.Unlock()
	}
	if name == "" || validFileName(name) != nil {
		httpError(w, http.StatusNotFound, "no finished download with that id (open the browser's live view to see its downloads)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Minute)
	defer cancel()
	c, err := h.openFiles(ctx)
	if err != nil {
		s.log.Warn("browser download", "agent", agent.ID, "err", err)
		httpError(w, http.StatusBadGateway, "the agent's sandbox could not be reached")
		return
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Now().Add(30 * time.Minute))
	br := bufio.NewReader(c)
	_, err = c.Write(wire.AppendStr([]byte{filesGet}, name))
	if err == nil {
		err = readFilesReply(br)
	}
	var size uint64
	if err == nil {
		err = binary.Read(br, binary.BigEndian, &size)
	}
	if err == nil && size > MaxDownload {
		err = fmt.Errorf("a download of %d bytes", size)
	}
	if err != nil {
		s.log.Warn("browser download", "agent", agent.ID, "err", err)
		httpError(w, http.StatusBadGateway, "the download could not be read from the agent's sandbox")
		return
	}
	if s.cfg.OnCall != nil {
		s.cfg.OnCall(agent, v, "download", name)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Content-Length", strconv.FormatUint(size, 10))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	io.CopyN(w, br, int64(size))
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}
