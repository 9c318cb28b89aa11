package image

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
)

// SBOM is the wsu image's software bill of materials, SPDX 2.3 JSON (make
// image writes it beside the archive, bin/wsu-image.spdx.json): the image,
// each Go executable in it, and every module each links, with the Go
// toolchain (the stdlib), read from the executables' build information —
// what `go version -m` prints — so it lists what was linked, at the
// versions linked (a replacement's, where go.mod replaces a module), not
// what go.mod allows. The node agents wsu embeds are built from the same
// module graph and link a subset of its modules. Every timestamp is m's,
// so the same commit gives the same bytes.
func SBOM(contextDir string, s Spec, m Meta) ([]byte, error) {
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        "wsu-image-" + m.Version,
		// Unique per build: the version and the commit.
		DocumentNamespace: Source + "/spdx/wsu-image/" + m.Version + "/" + m.Revision,
		CreationInfo: spdxCreationInfo{
			Created:  m.Created.UTC().Format("2006-01-02T15:04:05Z"),
			Creators: []string{"Tool: wsu-image (build/image)"},
		},
		Packages: []spdxPackage{{
			Name: "wsu-image", SPDXID: "SPDXRef-Image", VersionInfo: m.Version,
			DownloadLocation: noAssertion, PrimaryPackagePurpose: "CONTAINER",
			Supplier: "Organization: wsu-project",
		}},
		Relationships: []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: "SPDXRef-Image"}},
	}
	ids := map[string]string{} // module path@version → SPDXID
	for i, f := range s.Files {
		bi, err := buildinfo.ReadFile(filepath.Join(contextDir, f.Src))
		if err != nil {
			continue // not a Go executable: passwd, the CA bundle
		}
		bin := fmt.Sprintf("SPDXRef-Executable-%d", i)
		doc.Packages = append(doc.Packages, spdxPackage{
			Name: f.Dest, SPDXID: bin, VersionInfo: m.Version, DownloadLocation: noAssertion,
			PrimaryPackagePurpose: "APPLICATION", Comment: "built from " + bi.Path,
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: "SPDXRef-Image", Type: "CONTAINS", Related: bin})
		main := bi.Main
		if main.Version == "" || main.Version == "(devel)" {
			main.Version = m.Version // built from a checkout: the Makefile's version
		}
		mods := []*debug.Module{{Path: "stdlib", Version: bi.GoVersion}, &main}
		mods = append(mods, bi.Deps...)
		for _, mod := range mods {
			id := doc.module(ids, Linked(mod))
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: bin, Type: "DEPENDS_ON", Related: id})
		}
	}
	if len(doc.Packages) == 1 {
		return nil, fmt.Errorf("sbom: no Go executable in %s", contextDir)
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	return append(out, '\n'), err
}

// Linked is the module a build linked for mod: its replacement, if any.
func Linked(mod *debug.Module) debug.Module {
	if mod.Replace != nil {
		return *mod.Replace
	}
	return *mod
}

// module adds a Go module's package once and returns its SPDXID.
func (d *spdxDocument) module(ids map[string]string, mod debug.Module) string {
	key := mod.Path + "@" + mod.Version
	if id, ok := ids[key]; ok {
		return id
	}
	id := fmt.Sprintf("SPDXRef-Go-%d", len(ids))
	ids[key] = id
	p := spdxPackage{
		Name: mod.Path, SPDXID: id, VersionInfo: mod.Version, DownloadLocation: noAssertion,
		PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs: []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl",
			Locator: "pkg:golang/" + mod.Path + "@" + mod.Version}},
	}
	if mod.Sum != "" {
		p.Comment = "go.sum " + mod.Sum
	}
	d.Packages = append(d.Packages, p)
	return id
}

// SBOMModules reads an SBOM's Go modules back, as path@version, sorted.
func SBOMModules(data []byte) ([]string, error) {
	var doc spdxDocument
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			if r.Type == "purl" && strings.HasPrefix(r.Locator, "pkg:golang/") {
				out = append(out, p.Name+"@"+p.VersionInfo)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

const noAssertion = "NOASSERTION"

type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string            `json:"name"`
	SPDXID                string            `json:"SPDXID"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	Supplier              string            `json:"supplier,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	Comment               string            `json:"comment,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}
