package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/gantry-dev/gantry/api"
	yaml "go.yaml.in/yaml/v3"
)

// Document is one parsed resource; exactly one of Cluster, Service,
// Secret and FailoverGroup is set.
type Document struct {
	Index         int
	Cluster       *api.Cluster
	Service       *api.Service
	Secret        *api.Secret
	FailoverGroup *api.FailoverGroup
}

// Kind is the resource kind.
func (d Document) Kind() string {
	switch {
	case d.Cluster != nil:
		return api.KindCluster
	case d.Secret != nil:
		return api.KindSecret
	case d.FailoverGroup != nil:
		return api.KindFailoverGroup
	}
	return api.KindService
}

// Name is the resource name.
func (d Document) Name() string {
	switch {
	case d.Cluster != nil:
		return d.Cluster.Metadata.Name
	case d.Secret != nil:
		return d.Secret.Metadata.Name
	case d.FailoverGroup != nil:
		return d.FailoverGroup.Metadata.Name
	}
	return d.Service.Metadata.Name
}

// Parse reads every document of a YAML or JSON file, decodes it strictly,
// applies defaults and validates it, alone and against the other documents.
// Nil providers skips the checks that depend on them (provider names,
// instance types, agent binaries).
func Parse(file string, data []byte, providers Providers) ([]Document, error) {
	raw, err := splitDocuments(file, data)
	if err != nil {
		return nil, err
	}
	var docs []Document
	var errs ErrorList
	for i, tree := range raw {
		doc, docErrs := decodeDocument(tree)
		errs = append(errs, docErrs.locate(file, i+1)...)
		if docErrs == nil {
			doc.Index = i + 1
			docs = append(docs, doc)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(docs) == 0 {
		return nil, ErrorList{{File: file, Message: "no resources found (want documents with kind, metadata and spec)"}}
	}
	for i := range docs {
		Default(&docs[i])
		errs = append(errs, ValidateDocument(docs[i], providers).locate(file, docs[i].Index)...)
	}
	errs = append(errs, validateAcrossDocuments(file, docs, providers)...)
	return docs, errs.Err()
}

func splitDocuments(file string, data []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var trees []any
	for {
		var tree any
		err := dec.Decode(&tree)
		if errors.Is(err, io.EOF) {
			return trees, nil
		}
		if err != nil {
			return nil, ErrorList{{File: file, Document: len(trees) + 1, Message: "not valid YAML or JSON: " + cleanYAMLError(err)}}
		}
		if tree == nil {
			continue // an empty document between separators
		}
		trees = append(trees, tree)
		if len(trees) > MaxDocuments {
			return nil, ErrorList{{File: file, Message: fmt.Sprintf("more than %d documents", MaxDocuments)}}
		}
	}
}

func cleanYAMLError(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func decodeDocument(tree any) (Document, ErrorList) {
	var errs ErrorList
	m, ok := asMap(tree)
	if !ok {
		errs.add("", "expected an object with kind, metadata and spec, got %s", describe(tree))
		return Document{}, errs
	}
	var h header
	if m["kind"] != nil {
		decodeString("kind", m["kind"], reflect.ValueOf(&h.Kind).Elem(), &errs)
	}
	if v, ok := m["apiVersion"]; ok {
		decodeString("apiVersion", v, reflect.ValueOf(&h.APIVersion).Elem(), &errs)
		if errs == nil && h.APIVersion != api.APIVersion {
			errs.add("apiVersion", "unsupported apiVersion %q (want %q)", h.APIVersion, api.APIVersion)
		}
	}
	// Status is the server's: ignored on input, so that what `get -o
	// yaml` prints applies as it is.
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"generation", "createdAt", "updatedAt"} {
			delete(meta, k)
		}
	}
	if errs != nil {
		return Document{}, errs
	}
	var doc Document
	switch h.Kind {
	case api.KindCluster:
		doc.Cluster = &api.Cluster{}
		decodeValue("", m, reflect.ValueOf(doc.Cluster).Elem(), &errs)
	case api.KindService:
		doc.Service = &api.Service{}
		decodeValue("", m, reflect.ValueOf(doc.Service).Elem(), &errs)
	case api.KindSecret:
		doc.Secret = &api.Secret{}
		decodeValue("", m, reflect.ValueOf(doc.Secret).Elem(), &errs)
	case api.KindFailoverGroup:
		doc.FailoverGroup = &api.FailoverGroup{}
		decodeValue("", m, reflect.ValueOf(doc.FailoverGroup).Elem(), &errs)
	case "":
		errs.add("kind", "required (Cluster, Service, Secret or FailoverGroup)")
	default:
		kinds := []string{api.KindCluster, api.KindService, api.KindSecret, api.KindFailoverGroup}
		hint := ""
		if near := Nearest(h.Kind, kinds); near != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		errs.add("kind", "unknown kind %q%s (want Cluster, Service, Secret or FailoverGroup)", h.Kind, hint)
	}
	return doc, errs
}

func validateAcrossDocuments(file string, docs []Document, providers Providers) ErrorList {
	var errs ErrorList
	first := map[string]int{}
	clusters := map[string]*api.Cluster{}
	secrets := map[string]*api.Secret{}
	for _, d := range docs {
		key := d.Kind() + "/" + d.Name()
		if prev, dup := first[key]; dup {
			errs = append(errs, &FieldError{File: file, Document: d.Index, Path: "metadata.name",
				Message: fmt.Sprintf("duplicate %s %q (first in document %d)", d.Kind(), d.Name(), prev)})
			continue
		}
		first[key] = d.Index
		if d.Cluster != nil {
			clusters[d.Name()] = d.Cluster
		}
		if d.Secret != nil {
			secrets[d.Name()] = d.Secret
		}
	}
	errs = append(errs, failoverAcrossDocuments(file, docs, first, clusters)...)
	for _, d := range docs {
		if d.Service == nil {
			continue
		}
		for _, k := range sortedKeysOf(d.Service.Spec.SecretEnv) {
			ref := d.Service.Spec.SecretEnv[k]
			if sec := secrets[ref.Name]; sec != nil && !hasKey(sec.Spec.Keys, ref.Key) {
				errs = append(errs, &FieldError{File: file, Document: d.Index, Path: SecretEnvPath(k) + ".secretRef",
					Message: fmt.Sprintf("Secret %q (document %d) has no key %q", ref.Name, first[api.KindSecret+"/"+ref.Name], ref.Key)})
			}
		}
		if c, ok := clusters[d.Service.Spec.Cluster]; ok {
			errs = append(errs, ValidateServiceInCluster(d.Service, c, providers).locate(file, d.Index)...)
		}
	}
	return errs
}

func hasKey[V any](m map[string]V, key string) bool {
	_, ok := m[key]
	return ok
}
