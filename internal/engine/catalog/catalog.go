package catalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// ComputeType is an Azure Machine Learning compute target kind a size can back.
type ComputeType string

// The compute types a size can support.
const (
	ComputeCluster   ComputeType = "ComputeCluster"
	ComputeInstance  ComputeType = "ComputeInstance"
	OnlineDeployment ComputeType = "OnlineDeployment"
)

// ComputeTypes lists the values in a fixed order (used for validators and docs).
// The slice is new on every call.
func ComputeTypes() []ComputeType {
	return []ComputeType{ComputeCluster, ComputeInstance, OnlineDeployment}
}

// Valid reports whether t is one of ComputeTypes.
func (t ComputeType) Valid() bool {
	return slices.Contains(ComputeTypes(), t)
}

// ParseComputeType finds a compute type by name, case-insensitively, returning its
// canonical spelling.
func ParseComputeType(s string) (ComputeType, bool) {
	for _, t := range ComputeTypes() {
		if strings.EqualFold(string(t), s) {
			return t, true
		}
	}
	return "", false
}

// Size is one VM size: the catalog's JSON form is also the engine's wire form.
type Size struct {
	Name                  string        `json:"name"`
	Family                string        `json:"family"`
	VCPUs                 int64         `json:"vcpus"`
	GPUs                  int64         `json:"gpus"`
	GPUModel              string        `json:"gpu_model"`
	MemoryGB              float64       `json:"memory_gb"`
	OSVhdSizeMB           int64         `json:"os_vhd_size_mb"`
	MaxResourceVolumeMB   int64         `json:"max_resource_volume_mb"`
	LowPriorityCapable    bool          `json:"low_priority_capable"`
	PremiumIO             bool          `json:"premium_io"`
	SupportedComputeTypes []ComputeType `json:"supported_compute_types"`
	RequiresApproval      bool          `json:"requires_approval"` // the family requires approval
	Isolated              bool          `json:"isolated"`
	RDMACapable           bool          `json:"rdma_capable"`
	RetiredOn             string        `json:"retired_on,omitempty"` // YYYY-MM-DD, empty when current
	Successor             string        `json:"successor,omitempty"`
}

// Retired reports whether Azure has retired the size.
func (s Size) Retired() bool { return s.RetiredOn != "" }

// Supports reports whether the size can back compute type t.
func (s Size) Supports(t ComputeType) bool {
	return slices.Contains(s.SupportedComputeTypes, t)
}

// clone returns a copy of s that shares no memory with it.
func (s Size) clone() Size {
	s.SupportedComputeTypes = slices.Clone(s.SupportedComputeTypes)
	return s
}

// Family is a VM family as Azure spells it in its vCPU usage and quota list.
type Family struct {
	Name             string `json:"name"`
	DefaultQuota     int64  `json:"default_quota"` // vCPUs
	RequiresApproval bool   `json:"requires_approval"`
}

//go:embed catalog.json
var catalogJSON []byte

// data is the parsed catalog; nothing outside load writes to it.
type data struct {
	asOf        string
	families    []Family // sorted by name
	sizes       []Size   // sorted by name
	familyByKey map[string]int
	sizeByKey   map[string]int
}

// cat parses the embedded catalog on first use, not at package initialisation: every
// process of this binary (each CLI call, each node agent) would otherwise pay for it at
// start (1.4 ms), most of them never looking a size up.
var cat = sync.OnceValue(func() *data { return mustLoad(catalogJSON) })

func mustLoad(raw []byte) *data {
	d, err := load(raw)
	if err != nil {
		panic("catalog: embedded catalog.json is invalid: " + err.Error())
	}
	return d
}

// file is the layout of catalog.json.
type file struct {
	AsOf     string   `json:"as_of"`
	Families []Family `json:"families"`
	Sizes    []Size   `json:"sizes"`
}

// load parses and checks a catalog. It refuses data the lookups cannot serve correctly
// (duplicate names, sizes of unknown families, dangling successors, bad dates or compute
// types), so a bad edit of catalog.json fails every test rather than misleading users.
func load(raw []byte) (*data, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := time.Parse(time.DateOnly, f.AsOf); err != nil {
		return nil, fmt.Errorf("as_of %q is not a YYYY-MM-DD date", f.AsOf)
	}
	d := &data{
		asOf:        f.AsOf,
		families:    f.Families,
		sizes:       f.Sizes,
		familyByKey: make(map[string]int, len(f.Families)),
		sizeByKey:   make(map[string]int, len(f.Sizes)),
	}
	slices.SortFunc(d.families, func(a, b Family) int { return compareNames(a.Name, b.Name) })
	slices.SortFunc(d.sizes, func(a, b Size) int { return compareNames(a.Name, b.Name) })

	for i, fam := range d.families {
		if fam.Name == "" {
			return nil, fmt.Errorf("family %d has no name", i)
		}
		key := strings.ToLower(fam.Name)
		if _, dup := d.familyByKey[key]; dup {
			return nil, fmt.Errorf("family %q is listed twice", fam.Name)
		}
		if fam.DefaultQuota < 0 {
			return nil, fmt.Errorf("family %q: negative default_quota", fam.Name)
		}
		if fam.RequiresApproval && fam.DefaultQuota != 0 {
			return nil, fmt.Errorf("family %q requires approval, so its default_quota must be 0", fam.Name)
		}
		d.familyByKey[key] = i
	}
	for i := range d.sizes {
		s := &d.sizes[i]
		if s.Name == "" {
			return nil, fmt.Errorf("size %d has no name", i)
		}
		key := strings.ToLower(s.Name)
		if _, dup := d.sizeByKey[key]; dup {
			return nil, fmt.Errorf("size %q is listed twice", s.Name)
		}
		d.sizeByKey[key] = i
		fi, ok := d.familyByKey[strings.ToLower(s.Family)]
		if !ok {
			return nil, fmt.Errorf("size %q: unknown family %q", s.Name, s.Family)
		}
		fam := d.families[fi]
		if s.Family != fam.Name {
			return nil, fmt.Errorf("size %q: family must be spelled %q", s.Name, fam.Name)
		}
		// requires_approval belongs to the family; the data file does not repeat it.
		s.RequiresApproval = fam.RequiresApproval
		if err := checkSize(*s); err != nil {
			return nil, fmt.Errorf("size %q: %w", s.Name, err)
		}
	}
	for _, s := range d.sizes {
		if !s.Retired() {
			continue
		}
		si, ok := d.sizeByKey[strings.ToLower(s.Successor)]
		if !ok {
			return nil, fmt.Errorf("size %q: successor %q is not in the catalog", s.Name, s.Successor)
		}
		succ := d.sizes[si]
		if succ.Name != s.Successor {
			return nil, fmt.Errorf("size %q: successor must be spelled %q", s.Name, succ.Name)
		}
		if succ.Retired() {
			return nil, fmt.Errorf("size %q: successor %q is retired too", s.Name, s.Successor)
		}
	}
	return d, nil
}

// checkSize checks the fields of one size that need nothing else from the catalog.
func checkSize(s Size) error {
	switch {
	case s.VCPUs <= 0:
		return fmt.Errorf("vcpus must be positive")
	case s.MemoryGB <= 0:
		return fmt.Errorf("memory_gb must be positive")
	case s.GPUs < 0:
		return fmt.Errorf("gpus must not be negative")
	case s.GPUs > 0 && s.GPUModel == "":
		return fmt.Errorf("a GPU size needs a gpu_model")
	case s.GPUs == 0 && s.GPUModel != "":
		return fmt.Errorf("gpu_model %q on a size without GPUs", s.GPUModel)
	case s.OSVhdSizeMB <= 0:
		return fmt.Errorf("os_vhd_size_mb must be positive")
	case s.MaxResourceVolumeMB < 0:
		return fmt.Errorf("max_resource_volume_mb must not be negative")
	case len(s.SupportedComputeTypes) == 0:
		return fmt.Errorf("supported_compute_types is empty")
	}
	// Compute types must be valid, distinct and in ComputeTypes order, so output is stable.
	order := ComputeTypes()
	last := -1
	for _, t := range s.SupportedComputeTypes {
		i := slices.Index(order, t)
		if i < 0 {
			return fmt.Errorf("unknown compute type %q", t)
		}
		if i <= last {
			return fmt.Errorf("supported_compute_types must be distinct and in the order %v", order)
		}
		last = i
	}
	if s.Retired() {
		if _, err := time.Parse(time.DateOnly, s.RetiredOn); err != nil {
			return fmt.Errorf("retired_on %q is not a YYYY-MM-DD date", s.RetiredOn)
		}
		if s.Successor == "" {
			return fmt.Errorf("a retired size needs a successor")
		}
	} else if s.Successor != "" {
		return fmt.Errorf("successor %q on a size that is not retired", s.Successor)
	}
	return nil
}

// compareNames orders names case-insensitively, then byte-wise so the order is total.
func compareNames(a, b string) int {
	if c := strings.Compare(strings.ToLower(a), strings.ToLower(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// AsOf is the date (YYYY-MM-DD) the catalog data was last checked against Azure's
// published tables.
func AsOf() string { return cat().asOf }

// Lookup finds a size by name, case-insensitively, returning its canonical spelling.
func Lookup(name string) (Size, bool) {
	i, ok := cat().sizeByKey[strings.ToLower(name)]
	if !ok {
		return Size{}, false
	}
	return cat().sizes[i].clone(), true
}

// LookupFamily finds a family by name, case-insensitively.
func LookupFamily(name string) (Family, bool) {
	i, ok := cat().familyByKey[strings.ToLower(name)]
	if !ok {
		return Family{}, false
	}
	return cat().families[i], true
}

// Families lists every family, sorted by name (case-insensitively). The slice is a copy.
func Families() []Family {
	return slices.Clone(cat().families)
}

// Sizes lists every size, retired ones included, sorted by name (case-insensitively).
// The result is a deep copy: callers may change it without changing the catalog.
func Sizes() []Size {
	return collect(func(Size) bool { return true })
}

// Isolated lists the isolated sizes (dedicated to a single customer), sorted by name.
func Isolated() []Size {
	return collect(func(s Size) bool { return s.Isolated })
}

// Filter selects sizes for List; its zero value selects every current size.
type Filter struct {
	ComputeType    ComputeType // "" = any
	Family         string      // "" = any; case-insensitive
	MinVCPUs       int64
	MinMemoryGB    float64
	MinGPUs        int64
	IncludeRetired bool
}

// Match reports whether s passes every condition of f.
func (f Filter) Match(s Size) bool {
	switch {
	case !f.IncludeRetired && s.Retired():
		return false
	case f.ComputeType != "" && !s.Supports(f.ComputeType):
		return false
	case f.Family != "" && !strings.EqualFold(f.Family, s.Family):
		return false
	case s.VCPUs < f.MinVCPUs, s.MemoryGB < f.MinMemoryGB, s.GPUs < f.MinGPUs:
		return false
	}
	return true
}

// List returns the sizes matching f, sorted by name (case-insensitively), as copies.
func List(f Filter) []Size {
	return collect(f.Match)
}

func collect(keep func(Size) bool) []Size {
	out := []Size{}
	for _, s := range cat().sizes {
		if keep(s) {
			out = append(out, s.clone())
		}
	}
	return out
}
