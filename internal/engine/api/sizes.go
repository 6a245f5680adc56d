package api

import (
	"net/url"
	"strconv"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
)

// EncodeSizeFilter writes a filter as the query of GET /v1/sizes.
func EncodeSizeFilter(f SizeFilter) url.Values {
	q := url.Values{}
	if f.ComputeType != "" {
		q.Set("compute_type", string(f.ComputeType))
	}
	if f.Family != "" {
		q.Set("family", f.Family)
	}
	if f.MinVCPUs != 0 {
		q.Set("min_vcpus", strconv.FormatInt(f.MinVCPUs, 10))
	}
	if f.MinGPUs != 0 {
		q.Set("min_gpus", strconv.FormatInt(f.MinGPUs, 10))
	}
	if f.MinMemoryGB != 0 {
		q.Set("min_memory_gb", strconv.FormatFloat(f.MinMemoryGB, 'g', -1, 64))
	}
	if f.IncludeRetired {
		q.Set("include_retired", "true")
	}
	return q
}

// DecodeSizeFilter reads the query of GET /v1/sizes.
func DecodeSizeFilter(q url.Values) (SizeFilter, error) {
	f := SizeFilter{ComputeType: catalog.ComputeType(q.Get("compute_type")), Family: q.Get("family")}
	var err error
	if f.MinVCPUs, err = queryInt(q, "min_vcpus"); err != nil {
		return f, err
	}
	if f.MinGPUs, err = queryInt(q, "min_gpus"); err != nil {
		return f, err
	}
	if v := q.Get("min_memory_gb"); v != "" {
		if f.MinMemoryGB, err = strconv.ParseFloat(v, 64); err != nil {
			return f, Errorf(CodeInvalid, "min_memory_gb", "min_memory_gb must be a number, got %q", v)
		}
	}
	if v := q.Get("include_retired"); v != "" {
		if f.IncludeRetired, err = strconv.ParseBool(v); err != nil {
			return f, Errorf(CodeInvalid, "include_retired", "include_retired must be true or false, got %q", v)
		}
	}
	return f, nil
}

func queryInt(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, Errorf(CodeInvalid, name, "%s must be an integer, got %q", name, v)
	}
	return n, nil
}
