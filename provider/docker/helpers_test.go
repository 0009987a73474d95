package docker_test

import (
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
)

func stdcopyAll(w io.Writer, r io.Reader) (int64, error) { return stdcopy.StdCopy(w, w, r) }
