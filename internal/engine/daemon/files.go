package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// This file holds what keeps a data dir private: its directories are 0700 and its files
// 0600 even when they existed before with looser modes, and the API token of a TCP
// listener lives in a 0600 file that is refused when others can read it.

// secureDir creates dir (and its parents) and makes dir itself 0700, whatever its mode was.
func secureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// secureFiles makes the data dir's own files 0600 where they exist.
func secureFiles(dataDir string) error {
	for _, name := range []string{StoreFile, LogFile, LockFile, TokenFile} {
		err := os.Chmod(filepath.Join(dataDir, name), 0o600)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("securing %s: %w", name, err)
		}
	}
	return nil
}

// isTCP reports whether a listen address is a TCP one.
func isTCP(listen string) bool {
	u, err := url.Parse(listen)
	return err == nil && u.Scheme == "tcp"
}

// ReadTokenFile reads an API token from path. A file that group or others may read is
// refused: anyone who can read the token can act as the engine's user.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s is readable by group or others (mode %04o): run 'chmod 600 %s'", path, perm, path)
	}
	raw := make([]byte, 4096)
	n, err := f.Read(raw)
	if err != nil && n == 0 {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	token := strings.TrimSpace(string(raw[:n]))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return token, nil
}

// EnsureTokenFile returns the token in the data dir's TokenFile, making the file (mode
// 0600, a random 256-bit token) when it does not exist; made reports whether it did.
func EnsureTokenFile(dataDir string) (token, path string, made bool, err error) {
	path = filepath.Join(dataDir, TokenFile)
	token, made, err = ensureSecretFile(path, "an API token")
	return token, path, made, err
}

// ensureSecretFile reads the secret in path, or makes 32 random bytes (hex) and writes
// them there (0600) when the file does not exist; what names the secret in errors.
func ensureSecretFile(path, what string) (secret string, made bool, err error) {
	secret, err = ReadTokenFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return secret, false, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", false, fmt.Errorf("making %s: %w", what, err)
	}
	secret = hex.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	return secret, true, nil
}

// LocalToken returns the token an engine serving dataDir over TCP wrote there, for a
// client on the same machine that was given none. It returns "" and no error when there
// is no token file, and an error when the file cannot be used (its mode, its contents).
func LocalToken(dataDir string) (string, error) {
	token, err := ReadTokenFile(filepath.Join(dataDir, TokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return token, err
}
