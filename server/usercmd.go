package server

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/server/store"
)

const userUsage = `usage:
  porthole user add NAME [--admin] --password-stdin [--data DIR] [--db URL]
  porthole user list [--data DIR] [--db URL]
  porthole user passwd NAME --password-stdin [--data DIR] [--db URL]
  porthole user rm NAME [--data DIR] [--db URL]`

// UserCommand runs `porthole user ...` against the same store as `porthole serve`
// (--data/--db, or PORTHOLE_DATA/PORTHOLE_DB).
func UserCommand(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	return userCommand(ctx, args, stdin, stdout, os.Getenv)
}

func userCommand(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return errors.New(userUsage)
	}
	verb := args[0]
	fs := flag.NewFlagSet("porthole user "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	data := fs.String("data", "", "data directory (env PORTHOLE_DATA, default ./data)")
	db := fs.String("db", "", "database URL (env PORTHOLE_DB)")
	admin := fs.Bool("admin", false, "make the user an admin (add)")
	pwStdin := fs.Bool("password-stdin", false, "read the password from stdin")
	// Flags may come before or after NAME.
	var pos []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return fmt.Errorf("%w\n%s", err, userUsage)
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		rest = rest[1:]
	}
	if *data == "" {
		*data = getenv("PORTHOLE_DATA")
	}
	if *data == "" {
		*data = "./data"
	}
	if *db == "" {
		*db = getenv("PORTHOLE_DB")
	}
	wantArgs := map[string]int{"add": 1, "list": 0, "passwd": 1, "rm": 1}
	n, ok := wantArgs[verb]
	if !ok {
		return fmt.Errorf("unknown verb %q\n%s", verb, userUsage)
	}
	if len(pos) != n {
		return fmt.Errorf("%s takes %d argument(s), got %d\n%s", verb, n, len(pos), userUsage)
	}
	if *admin && verb != "add" {
		return fmt.Errorf("--admin is for add only")
	}
	readPassword := func() (string, error) {
		if !*pwStdin {
			return "", errors.New("pass the password on stdin with --password-stdin (never on the command line)")
		}
		line, err := bufio.NewReader(io.LimitReader(stdin, maxPasswordLen+2)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read password: %w", err)
		}
		pw := strings.TrimRight(line, "\r\n")
		if err := validatePassword(pw); err != nil {
			return "", err
		}
		return pw, nil
	}
	var pw string
	if verb == "add" || verb == "passwd" {
		var err error
		if pw, err = readPassword(); err != nil {
			return err
		}
	} else if *pwStdin {
		return fmt.Errorf("--password-stdin is for add and passwd only")
	}

	if err := os.MkdirAll(*data, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	st, err := store.Open(ctx, *db, *data)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	audit := func(action, detail string) {
		if err := st.AppendAudit(ctx, api.AuditEvent{Actor: "cli", Action: action, Detail: detail}); err != nil {
			fmt.Fprintf(os.Stderr, "porthole: audit: %v\n", err)
		}
	}
	switch verb {
	case "add":
		name := pos[0]
		if err := validateUsername(name); err != nil {
			return err
		}
		hash, err := hashPassword(pw)
		if err != nil {
			return err
		}
		perms := api.DefaultPermissions
		u, err := st.CreateUser(ctx, store.User{User: api.User{Username: name, Admin: *admin, Permissions: perms}, PasswordHash: hash})
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("user %q exists", name)
		} else if err != nil {
			return fmt.Errorf("create user: %w", err)
		}
		audit("user.create", userDetail(u))
		fmt.Fprintf(stdout, "created user %s (%s)\n", u.Username, u.ID)
	case "list":
		us, err := st.ListUsers(ctx)
		if err != nil {
			return fmt.Errorf("list users: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USERNAME\tADMIN\tTERMINAL\tDESKTOP\tBROWSER\tID\tCREATED")
		for _, u := range us {
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\t%s\n", u.Username, u.Admin, u.Permissions.Terminal,
				u.Permissions.Desktop, u.Permissions.Browser, u.ID, u.CreatedAt.UTC().Format("2006-01-02 15:04"))
		}
		return tw.Flush()
	case "passwd":
		u, err := st.GetUserByName(ctx, pos[0])
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no user %q", pos[0])
		} else if err != nil {
			return fmt.Errorf("find user: %w", err)
		}
		hash, err := hashPassword(pw)
		if err != nil {
			return err
		}
		if _, err := st.UpdateUser(ctx, u.ID, store.UserUpdate{PasswordHash: &hash}); err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if err := st.DeleteUserSessions(ctx, u.ID, nil); err != nil {
			return fmt.Errorf("revoke sessions: %w", err)
		}
		audit("user.update", userDetail(u.User)+": password")
		fmt.Fprintf(stdout, "changed the password of %s; their sessions are logged out\n", u.Username)
	case "rm":
		u, err := st.GetUserByName(ctx, pos[0])
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no user %q", pos[0])
		} else if err != nil {
			return fmt.Errorf("find user: %w", err)
		}
		if u.Admin {
			us, err := st.ListUsers(ctx)
			if err != nil {
				return fmt.Errorf("list users: %w", err)
			}
			others := 0
			for _, o := range us {
				if o.Admin && o.ID != u.ID {
					others++
				}
			}
			if others == 0 {
				return fmt.Errorf("%s is the last admin; add another admin first", u.Username)
			}
		}
		if err := st.DeleteUser(ctx, u.ID); err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		audit("user.delete", userDetail(u.User))
		fmt.Fprintf(stdout, "removed user %s and their agents\n", u.Username)
	}
	return nil
}
