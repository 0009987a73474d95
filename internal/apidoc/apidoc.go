// Package apidoc reads the doc comments of Gantry's API types from their
// source, so `gantry explain` says what the code's own comments say and
// cannot drift from them: cmd/gantry/cli embeds its output, and a test
// checks the embedded copy against the source.
package apidoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Docs are the comments of a package's struct types ("Type") and their
// fields ("Type.Field"), as plain text.
type Docs map[string]string

// Extract reads the Go files of dir (tests left out).
func Extract(dir string) (Docs, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	out := Docs{}
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("apidoc: %w", err)
		}
		collect(f, out)
	}
	return out, nil
}

func collect(f *ast.File, out Docs) {
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			typeDoc := ts.Doc
			if typeDoc == nil && len(gen.Specs) == 1 {
				typeDoc = gen.Doc
			}
			if text := plain(typeDoc); text != "" {
				out[ts.Name.Name] = text
			}
			for _, field := range st.Fields.List {
				text := plain(field.Doc)
				if text == "" {
					text = plain(field.Comment)
				}
				for _, name := range field.Names {
					if text != "" {
						out[ts.Name.Name+"."+name.Name] = text
					}
				}
			}
		}
	}
}

// plain is a comment group as one paragraph of text.
func plain(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}
