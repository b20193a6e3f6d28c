//go:build !js

package browser

import (
	"context"
	"errors"
)

// upload is a file chooser's upload in progress (FileBegin, FileData…, FileDone).
type upload struct{}

// upload receives a file for the open file chooser.
func (h *viewHub) upload(ctx context.Context, s *viewSession, session string, m Message) error {
	return errors.New("file upload is not available yet")
}
