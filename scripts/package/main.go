package main

import (
	"archive/zip"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// roots are the paths of the module that the functions need.
var roots = []string{"go.mod", "go.sum", "functions", "shared"}

// stubName and stub are the root file that points the buildpack at
// functions/. The Go functions-framework buildpack builds the package at the
// source root (it parses the root's .go files; with none it fails with
// "unable to find Go package"). The stub imports functions/, whose init()
// registers every function with functions-framework, and imports
// functions-framework's functions package, which makes the buildpack use
// its declarative main: that main serves the function named by
// FUNCTION_TARGET (the entry point) from the registry. The stub's package
// name is "functions", so the buildpack versions that import MODULE/<name>
// when a directory of that name exists at the root resolve to functions/
// too.
const stubName = "function.go"

const stub = `// Package functions is a build stub written by scripts/package for the Go
// functions-framework buildpack, which builds the package at the source
// root. Importing functions/ registers Tick, Schedules, GPU and Rent.
package functions

import (
	_ "github.com/GoogleCloudPlatform/functions-framework-go/functions"

	_ "github.com/baton-cron/baton/functions"
)
`

// epoch is the timestamp of every entry (the zip format's earliest date), so
// the same tree always gives the same bytes.
var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	out := flag.String("o", "dist/functions-source.zip", "zip file to write")
	root := flag.String("root", ".", "module root")
	check := flag.Bool("check", false, "extract the zip and go build it")
	flag.Parse()
	if err := run(*root, *out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

func run(root, out string, check bool) error {
	files, err := collect(root)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := write(&buf, root, files); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil { //nolint:gosec // G301: a build output dir for a zip of the public source, nothing secret
		return fmt.Errorf("create output dir: %w", err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil { //nolint:gosec // G306: a zip of the public source, which Terraform uploads; nothing secret
		return fmt.Errorf("write %s: %w", out, err)
	}
	fmt.Printf("package: wrote %s (%d files, %d bytes)\n", out, len(files)+1, buf.Len())
	if check {
		return build(buf.Bytes())
	}
	return nil
}

// collect lists the files to ship, slash-separated and sorted.
func collect(root string) ([]string, error) {
	var files []string
	for _, r := range roots {
		err := filepath.WalkDir(filepath.Join(root, r), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			files = append(files, rel)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("collect %s: %w", r, err)
		}
	}
	sort.Strings(files)
	return files, nil
}

// write zips the files and the stub with fixed metadata.
func write(w io.Writer, root string, files []string) error {
	zw := zip.NewWriter(w)
	add := func(name string, body []byte) error {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: epoch}
		h.SetMode(0o644)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return fmt.Errorf("zip %s: %w", name, err)
		}
		_, err = fw.Write(body)
		return err
	}
	if err := add(stubName, []byte(stub)); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		if err := add(f, b); err != nil {
			return err
		}
	}
	return zw.Close()
}

// build extracts the zip and compiles every package in it, as Cloud Build
// will, with the module cache this machine already has.
func build(data []byte) error {
	dir, err := os.MkdirTemp("", "baton-package-")
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer os.RemoveAll(dir)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("check: read zip: %w", err)
	}
	for _, f := range zr.File {
		if path.IsAbs(f.Name) || strings.Contains(f.Name, "..") {
			return fmt.Errorf("check: bad entry %q", f.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
			return fmt.Errorf("check: %w", err)
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("check: open %s: %w", f.Name, err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close() // only read; a read error is caught just below
		if err != nil {
			return fmt.Errorf("check: read %s: %w", f.Name, err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("check: go build ./... in the extracted zip failed: is something in functions/ or shared/ importing a package outside them?")
		}
		return fmt.Errorf("check: go build: %w", err)
	}
	fmt.Println("package: the zip builds on its own (go build ./...)")
	return nil
}
