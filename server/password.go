package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's minimum (m=19 MiB, t=2, p=1).
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16

	minPasswordLen = 8
	maxPasswordLen = 1024
)

// ErrBadHash is returned for a stored password hash that is not an argon2id PHC string we accept.
var ErrBadHash = errors.New("not an argon2id PHC string")

// argonSlots bounds concurrent argon2id computations: each takes 19 MiB and tens of
// milliseconds of CPU, so a burst of logins must queue rather than exhaust memory.
var argonSlots = make(chan struct{}, max(2, runtime.NumCPU()))

func argonKey(pw, salt []byte, t, m uint32, p uint8, n uint32) []byte {
	argonSlots <- struct{}{}
	defer func() { <-argonSlots }()
	return argon2.IDKey(pw, salt, t, m, p, n)
}

// hashPassword returns pw's argon2id hash as a PHC string:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash> (unpadded standard base64).
func hashPassword(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argonKey([]byte(pw), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// phc is a parsed argon2id PHC string.
type phc struct {
	memory  uint32
	time    uint32
	threads uint8
	salt    []byte
	key     []byte
}

func parsePHC(s string) (phc, error) {
	var p phc
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, ErrBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return p, fmt.Errorf("%w: version %q", ErrBadHash, parts[2])
	}
	var threads uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &threads); err != nil {
		return p, fmt.Errorf("%w: parameters %q", ErrBadHash, parts[3])
	}
	// Refuse weak or absurd parameters rather than verify against them.
	if p.memory < argonMemoryKiB || p.memory > 1<<22 || p.time < argonTime || p.time > 64 || threads < 1 || threads > 64 {
		return p, fmt.Errorf("%w: parameters out of range %q", ErrBadHash, parts[3])
	}
	p.threads = uint8(threads)
	var err error
	if p.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(p.salt) < 8 {
		return p, fmt.Errorf("%w: salt", ErrBadHash)
	}
	if p.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(p.key) < 16 || len(p.key) > 128 {
		return p, fmt.Errorf("%w: hash", ErrBadHash)
	}
	return p, nil
}

// verifyPassword reports whether pw matches the PHC string hash, comparing in constant time.
func verifyPassword(hash, pw string) (bool, error) {
	p, err := parsePHC(hash)
	if err != nil {
		return false, err
	}
	key := argonKey([]byte(pw), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(key, p.key) == 1, nil
}

// dummyHash is verified against when a login names no known user, so that the
// response time does not tell which usernames exist.
var dummyHash = sync.OnceValue(func() string {
	h, err := hashPassword("porthole dummy password")
	if err != nil {
		panic(err)
	}
	return h
})

func validatePassword(pw string) error {
	if len(pw) < minPasswordLen {
		return fmt.Errorf("the password must be at least %d characters", minPasswordLen)
	}
	if len(pw) > maxPasswordLen {
		return fmt.Errorf("the password must be at most %d bytes", maxPasswordLen)
	}
	return nil
}
