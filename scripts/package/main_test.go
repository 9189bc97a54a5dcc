package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tree writes files under a temporary module root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func zipNames(t *testing.T, root string) ([]string, []byte) {
	t.Helper()
	files, err := collect(root)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := write(&buf, root, files); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names, buf.Bytes()
}

func TestPackageSelectsFunctionSource(t *testing.T) {
	root := tree(t, map[string]string{
		"go.mod":                          "module example.com/m\n",
		"go.sum":                          "",
		"functions/functions.go":          "package functions\n",
		"functions/functions_test.go":     "package functions\n",
		"shared/store/store.go":           "package store\n",
		"shared/store/testdata/fixture":   "x",
		"shared/store/.hidden":            "x",
		"emulator/mongo/mongo.go":         "package mongo\n",
		"cmd/baton/main.go":               "package main\n",
		"tests/e2e_test.go":               "package tests\n",
		"infra/terraform/main.tf":         "",
		"shared/config/config.go":         "package config\n",
		"shared/config/config_example.go": "package config\n",
	})
	got, _ := zipNames(t, root)
	want := []string{
		"function.go",
		"functions/functions.go",
		"go.mod",
		"go.sum",
		"shared/config/config.go",
		"shared/config/config_example.go",
		"shared/store/store.go",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("zip entries (-want,+got):\n%s", d)
	}
}

func TestPackageIsDeterministic(t *testing.T) {
	root := tree(t, map[string]string{"go.mod": "module example.com/m\n", "go.sum": "", "functions/f.go": "package functions\n", "shared/x/x.go": "package x\n"})
	_, a := zipNames(t, root)
	// Touch every file: a new mtime must not change the bytes.
	if err := os.WriteFile(filepath.Join(root, "shared/x/x.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, b := zipNames(t, root)
	if !bytes.Equal(a, b) {
		t.Error("two packages of the same tree differ")
	}
}

func TestPackageStubAndMissingRoot(t *testing.T) {
	root := t.TempDir()
	// The stub is what makes the buildpack serve functions/: it must import
	// it, and functions-framework's functions package (declarative main).
	for _, imp := range []string{`_ "github.com/baton-cron/baton/functions"`, `_ "github.com/GoogleCloudPlatform/functions-framework-go/functions"`} {
		if !strings.Contains(stub, imp) {
			t.Errorf("stub does not import %s:\n%s", imp, stub)
		}
	}
	if !strings.Contains(stub, "package functions\n") {
		t.Errorf("stub is not package functions:\n%s", stub)
	}
	if _, err := collect(filepath.Join(root, "missing")); err == nil {
		t.Error("collect on a directory without go.mod succeeded")
	}
}
