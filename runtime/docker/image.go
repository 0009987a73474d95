package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// LabelBinary on an image built by BuildImage is the SHA-256 of the gantry
// binary inside, so a stale image is rebuilt.
const LabelBinary = "gantry.dev/binary-sha256"

// BinaryPath is where the gantry binary lives inside images built here.
const BinaryPath = "/gantry"

// libraryDirs are searched for a dynamic binary's shared libraries.
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// EnsureImage builds tag FROM scratch with binary as /gantry (its
// entrypoint), unless the engine already has tag built from the same
// binary. No registry is involved. A dynamically linked binary (a cgo or
// race build) gets its ELF interpreter and shared libraries copied in.
func EnsureImage(ctx context.Context, cli *client.Client, tag, binary string) error {
	sum, err := fileSHA256(binary)
	if err != nil {
		return err
	}
	existing, err := cli.ImageInspect(ctx, tag)
	if err == nil && existing.Config != nil && existing.Config.Labels[LabelBinary] == sum {
		return nil
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", tag, err)
	}
	buildContext, err := imageContext(binary, sum)
	if err != nil {
		return err
	}
	resp, err := cli.ImageBuild(ctx, buildContext, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Body.Close()
	return buildResult(resp.Body, tag)
}

// buildResult reads the build's JSON stream for an error.
func buildResult(r io.Reader, tag string) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("build image %s: read output: %w", tag, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("build image %s: %s", tag, msg.Error)
		}
	}
}

// imageContext is the build context: a Dockerfile and the files it copies.
func imageContext(binary, sum string) (io.Reader, error) {
	files := map[string]string{strings.TrimPrefix(BinaryPath, "/"): binary}
	libs, err := sharedLibraries(binary)
	if err != nil {
		return nil, err
	}
	for _, lib := range libs {
		files[strings.TrimPrefix(lib, "/")] = lib
	}
	var dockerfile strings.Builder
	dockerfile.WriteString("FROM scratch\n")
	for _, name := range sortedKeys(files) {
		fmt.Fprintf(&dockerfile, "COPY %s /%s\n", name, name)
	}
	fmt.Fprintf(&dockerfile, "LABEL %s=%s\nENTRYPOINT [%q]\n", LabelBinary, sum, BinaryPath)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := addTarFile(tw, "Dockerfile", []byte(dockerfile.String()), 0o644); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(files) {
		data, err := os.ReadFile(files[name])
		if err != nil {
			return nil, fmt.Errorf("image file: %w", err)
		}
		if err := addTarFile(tw, name, data, 0o755); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

func addTarFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// sharedLibraries lists what a dynamic ELF binary needs at run time: its
// interpreter and the libraries it names, resolved on this host. A static
// binary needs nothing.
func sharedLibraries(binary string) ([]string, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", binary, err)
	}
	defer f.Close()
	var out []string
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			return nil, fmt.Errorf("read interpreter of %s: %w", binary, err)
		}
		out = append(out, strings.TrimRight(string(data), "\x00"))
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("read libraries of %s: %w", binary, err)
	}
	for _, lib := range needed {
		path, err := findLibrary(lib)
		if err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

func findLibrary(name string) (string, error) {
	for _, dir := range libraryDirs {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("shared library %s not found in %v (build gantry with CGO_ENABLED=0 for a static binary)", name, libraryDirs)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("image binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("image binary: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
