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
	"os/exec"
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
// files. No registry is involved. A dynamically linked binary (a cgo or
// race build) gets its ELF interpreter and shared libraries copied in.
// Extras are more of the host's executables (HAProxy for edge machines),
// copied at their own paths with what they link.
func EnsureImage(ctx context.Context, cli *client.Client, tag, binary string, extras ...string) error {
	sum, err := imageSum(binary, extras)
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
	buildContext, err := imageContext(binary, sum, extras)
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

// imageSum is the binary's SHA-256, with the extras' (when any) folded in.
func imageSum(binary string, extras []string) (string, error) {
	sum, err := fileSHA256(binary)
	if err != nil || len(extras) == 0 {
		return sum, err
	}
	h := sha256.New()
	h.Write([]byte(sum))
	for _, extra := range extras {
		s, err := fileSHA256(extra)
		if err != nil {
			return "", err
		}
		h.Write([]byte(extra + "=" + s))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HostHAProxy is the host's HAProxy executable ("" when it has none): what
// the docker provider's machine image carries so edge machines serve the
// cluster's exposed ports.
func HostHAProxy() string {
	for _, candidate := range []string{"haproxy", "/usr/sbin/haproxy"} {
		if path, err := exec.LookPath(candidate); err == nil {
			if abs, err := filepath.Abs(path); err == nil {
				return abs
			}
		}
	}
	return ""
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
func imageContext(binary, sum string, extras []string) (io.Reader, error) {
	files := map[string]string{strings.TrimPrefix(BinaryPath, "/"): binary}
	for _, exe := range append([]string{binary}, extras...) {
		if exe != binary {
			files[strings.TrimPrefix(exe, "/")] = exe
		}
		libs, err := sharedLibraries(exe)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			files[strings.TrimPrefix(lib, "/")] = lib
		}
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
	seen := map[string]bool{}
	queue, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("read libraries of %s: %w", binary, err)
	}
	for len(queue) > 0 {
		lib := queue[0]
		queue = queue[1:]
		if seen[lib] {
			continue
		}
		seen[lib] = true
		path, err := findLibrary(lib)
		if err != nil {
			return nil, err
		}
		out = append(out, path)
		more, err := importedLibraries(path)
		if err != nil {
			return nil, err
		}
		queue = append(queue, more...)
	}
	return out, nil
}

// importedLibraries are the libraries a shared library needs in turn.
func importedLibraries(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("read libraries of %s: %w", path, err)
	}
	return libs, nil
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
