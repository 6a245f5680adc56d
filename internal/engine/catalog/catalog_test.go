package catalog

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"
)

const azureMLOSDiskMB = 1047552

func names(sizes []Size) []string {
	out := make([]string, len(sizes))
	for i, s := range sizes {
		out[i] = s.Name
	}
	return out
}

func mustLookup(t *testing.T, name string) Size {
	t.Helper()
	s, ok := Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q) found nothing", name)
	}
	return s
}

func TestEverySizeIsWellFormed(t *testing.T) {
	sizes := Sizes()
	if len(sizes) < 90 {
		t.Fatalf("catalog has %d sizes; expected the full set (90+)", len(sizes))
	}
	families := map[string]Family{}
	for _, f := range Families() {
		families[f.Name] = f
	}
	seen := map[string]string{}
	for _, s := range sizes {
		key := strings.ToLower(s.Name)
		if prev, dup := seen[key]; dup {
			t.Errorf("%q and %q differ only in case", prev, s.Name)
		}
		seen[key] = s.Name

		fam, ok := families[s.Family]
		if !ok {
			t.Errorf("%s: family %q is not in Families()", s.Name, s.Family)
		} else if s.RequiresApproval != fam.RequiresApproval {
			t.Errorf("%s: requires_approval %v, family %s says %v", s.Name, s.RequiresApproval, fam.Name, fam.RequiresApproval)
		}
		if !strings.HasPrefix(s.Name, "Standard_") && !strings.HasPrefix(s.Name, "Basic_") {
			t.Errorf("%s: name lacks the Standard_/Basic_ prefix", s.Name)
		}
		if s.VCPUs <= 0 || s.MemoryGB <= 0 {
			t.Errorf("%s: vcpus %d, memory %v GB; both must be positive", s.Name, s.VCPUs, s.MemoryGB)
		}
		if s.GPUs < 0 || (s.GPUs > 0) != (s.GPUModel != "") {
			t.Errorf("%s: gpus %d with gpu_model %q", s.Name, s.GPUs, s.GPUModel)
		}
		if s.OSVhdSizeMB != azureMLOSDiskMB {
			t.Errorf("%s: os_vhd_size_mb %d, want %d", s.Name, s.OSVhdSizeMB, azureMLOSDiskMB)
		}
		if s.MaxResourceVolumeMB <= 0 {
			t.Errorf("%s: max_resource_volume_mb %d, want the temp disk size", s.Name, s.MaxResourceVolumeMB)
		}
		if len(s.SupportedComputeTypes) == 0 {
			t.Errorf("%s: no supported compute types", s.Name)
		}
		for _, ct := range s.SupportedComputeTypes {
			if !slices.Contains(ComputeTypes(), ct) {
				t.Errorf("%s: invalid compute type %q", s.Name, ct)
			}
		}
		if wantLow := !s.Retired() && s.Family != "standardMSFamily"; s.LowPriorityCapable != wantLow {
			t.Errorf("%s: low_priority_capable %v, want %v (false for retired and M-series sizes)", s.Name, s.LowPriorityCapable, wantLow)
		}
	}
}

func TestSortedOrder(t *testing.T) {
	less := func(a, b string) bool { return strings.ToLower(a) < strings.ToLower(b) }
	check := func(what string, ns []string) {
		t.Helper()
		for i := 1; i < len(ns); i++ {
			if !less(ns[i-1], ns[i]) {
				t.Errorf("%s not sorted by name: %q before %q", what, ns[i-1], ns[i])
			}
		}
	}
	check("Sizes()", names(Sizes()))
	check("Isolated()", names(Isolated()))
	check("List()", names(List(Filter{IncludeRetired: true, MinGPUs: 1})))
	var fams []string
	for _, f := range Families() {
		fams = append(fams, f.Name)
	}
	check("Families()", fams)
}

func TestRequiredSizesArePresent(t *testing.T) {
	bySeries := map[string][]string{
		"standardDFamily":   {"D1", "D2", "D3", "D4", "D11", "D12", "D13", "D14"},
		"standardDv2Family": {"D1_v2", "D2_v2", "D3_v2", "D4_v2", "D5_v2", "D11_v2", "D12_v2", "D13_v2", "D14_v2", "D15_v2"},
		"standardDSv2Family": {"DS1_v2", "DS2_v2", "DS3_v2", "DS4_v2", "DS5_v2", "DS11_v2", "DS12_v2", "DS13_v2",
			"DS14_v2", "DS15_v2"},
		"standardFSv2Family": {"F2s_v2", "F4s_v2", "F8s_v2", "F16s_v2", "F32s_v2", "F48s_v2", "F64s_v2", "F72s_v2"},
		"standardMSFamily": {"M8ms", "M16ms", "M32ts", "M32ls", "M32ms", "M64s", "M64ms", "M64ls", "M128s",
			"M128ms"},
		"standardNCFamily":           {"NC6", "NC12", "NC24", "NC24r"},
		"standardNCSv2Family":        {"NC6s_v2", "NC12s_v2", "NC24s_v2", "NC24rs_v2"},
		"standardNCSv3Family":        {"NC6s_v3", "NC12s_v3", "NC24s_v3", "NC24rs_v3"},
		"standardNDSFamily":          {"ND6s", "ND12s", "ND24s", "ND24rs"},
		"standardNDSv2Family":        {"ND40rs_v2"},
		"standardNVFamily":           {"NV6", "NV12", "NV24"},
		"standardNVPromoFamily":      {"NV6_Promo", "NV12_Promo", "NV24_Promo"},
		"standardNVSv3Family":        {"NV12s_v3", "NV24s_v3", "NV48s_v3"},
		"standardNCASv3_T4Family":    {"NC4as_T4_v3", "NC8as_T4_v3", "NC16as_T4_v3", "NC64as_T4_v3"},
		"standardNCADSA100v4Family":  {"NC24ads_A100_v4", "NC48ads_A100_v4", "NC96ads_A100_v4"},
		"standardNDASv4_A100Family":  {"ND96asr_v4"},
		"standardNDAMSv4_A100Family": {"ND96amsr_A100_v4"},
		"standardNDSH100v5Family":    {"ND96isr_H100_v5"},
		"standardA0_A7Family":        {"A1", "A2", "A3", "A4"},
		"standardAv2Family":          {"A1_v2", "A2_v2", "A4_v2", "A8_v2", "A2m_v2", "A4m_v2", "A8m_v2"},
		"standardHBSFamily":          {"HB60rs"},
		"standardHBv3Family":         {"HB120rs_v3"},
	}
	for family, short := range bySeries {
		for _, n := range short {
			name := "Standard_" + n
			s, ok := Lookup(name)
			if !ok {
				t.Errorf("%s is missing", name)
				continue
			}
			if s.Name != name || s.Family != family {
				t.Errorf("%s: got name %q family %q, want family %q", name, s.Name, s.Family, family)
			}
		}
	}
	for _, n := range []string{"Basic_A1", "Basic_A2", "Basic_A3", "Basic_A4"} {
		if s, ok := Lookup(n); !ok || s.Family != "basicAFamily" {
			t.Errorf("%s: got %+v, %v; want a basicAFamily size", n, s, ok)
		}
	}
}

// Spot checks against Azure's published size tables.
func TestPublishedNumbers(t *testing.T) {
	tests := []struct {
		name      string
		vcpus     int64
		memGB     float64
		gpus      int64
		gpuModel  string
		tempGiB   int64
		premiumIO bool
	}{
		{"Standard_D1_v2", 1, 3.5, 0, "", 50, false},
		{"Standard_DS3_v2", 4, 14, 0, "", 28, true},
		{"Standard_D15_v2", 20, 140, 0, "", 1000, false},
		{"Standard_F72s_v2", 72, 144, 0, "", 576, true},
		{"Standard_M8ms", 8, 218.75, 0, "", 256, true},
		{"Standard_M128ms", 128, 3892, 0, "", 4096, true},
		{"Standard_NC6", 6, 56, 1, "K80", 340, false},
		{"Standard_NC24rs_v2", 24, 448, 4, "P100", 2948, true},
		{"Standard_NC6s_v3", 6, 112, 1, "V100", 736, true},
		{"Standard_ND24s", 24, 448, 4, "P40", 2948, true},
		{"Standard_ND40rs_v2", 40, 672, 8, "V100", 2948, true},
		{"Standard_NV6", 6, 56, 1, "M60", 340, false},
		{"Standard_NV48s_v3", 48, 448, 4, "M60", 1280, true},
		{"Standard_NC4as_T4_v3", 4, 28, 1, "T4", 180, true},
		{"Standard_NC16as_T4_v3", 16, 110, 1, "T4", 360, true},
		{"Standard_NC24ads_A100_v4", 24, 220, 1, "A100", 64, true},
		{"Standard_ND96asr_v4", 96, 900, 8, "A100", 6000, true},
		{"Standard_ND96amsr_A100_v4", 96, 1900, 8, "A100", 6400, true},
		{"Standard_ND96isr_H100_v5", 96, 1900, 8, "H100", 1000, true},
		{"Standard_A1", 1, 1.75, 0, "", 70, false},
		{"Standard_A8m_v2", 8, 64, 0, "", 80, false},
		{"Standard_HB60rs", 60, 240, 0, "", 700, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustLookup(t, tt.name)
			if s.VCPUs != tt.vcpus || s.MemoryGB != tt.memGB || s.GPUs != tt.gpus {
				t.Errorf("got %d vCPUs, %v GB, %d GPUs; want %d, %v, %d", s.VCPUs, s.MemoryGB, s.GPUs, tt.vcpus, tt.memGB, tt.gpus)
			}
			if !strings.Contains(s.GPUModel, tt.gpuModel) || (tt.gpuModel == "") != (s.GPUModel == "") {
				t.Errorf("gpu_model %q, want one naming %q", s.GPUModel, tt.gpuModel)
			}
			if s.MaxResourceVolumeMB != tt.tempGiB*1024 {
				t.Errorf("max_resource_volume_mb %d, want %d GiB = %d", s.MaxResourceVolumeMB, tt.tempGiB, tt.tempGiB*1024)
			}
			if s.PremiumIO != tt.premiumIO {
				t.Errorf("premium_io %v, want %v", s.PremiumIO, tt.premiumIO)
			}
		})
	}
}

// featureLetters splits an Azure size name into its series letters and its lower-case
// feature letters: "Standard_NC24ads_A100_v4" gives "NC", "ads"; "Standard_DS1_v2" gives "DS", "".
func featureLetters(name string) (series, features string) {
	_, rest, _ := strings.Cut(name, "_")
	rest, _, _ = strings.Cut(rest, "_")
	i := strings.IndexFunc(rest, unicode.IsDigit)
	if i < 0 {
		return rest, ""
	}
	series, rest = rest[:i], strings.TrimLeftFunc(rest[i:], unicode.IsDigit)
	return series, rest
}

func TestFlagsFollowAzureNaming(t *testing.T) {
	if s, f := featureLetters("Standard_NC24ads_A100_v4"); s != "NC" || f != "ads" {
		t.Fatalf("featureLetters broken: %q %q", s, f)
	}
	for _, s := range Sizes() {
		series, features := featureLetters(s.Name)
		premium := strings.Contains(features, "s") || strings.HasSuffix(series, "S")
		if s.PremiumIO != premium {
			t.Errorf("%s: premium_io %v, but its name says %v", s.Name, s.PremiumIO, premium)
		}
		rdma := strings.Contains(features, "r")
		if s.RDMACapable != rdma {
			t.Errorf("%s: rdma_capable %v, but its name says %v", s.Name, s.RDMACapable, rdma)
		}
	}
	wantRDMA := []string{
		"Standard_HB120rs_v3", "Standard_HB60rs", "Standard_NC24r", "Standard_NC24rs_v2", "Standard_NC24rs_v3",
		"Standard_ND24rs", "Standard_ND40rs_v2", "Standard_ND96amsr_A100_v4", "Standard_ND96asr_v4",
		"Standard_ND96isr_H100_v5",
	}
	var gotRDMA []string
	for _, s := range Sizes() {
		if s.RDMACapable {
			gotRDMA = append(gotRDMA, s.Name)
		}
	}
	if !slices.Equal(gotRDMA, wantRDMA) {
		t.Errorf("RDMA-capable sizes:\n got %v\nwant %v", gotRDMA, wantRDMA)
	}
}

func TestRetirements(t *testing.T) {
	retiredFamilies := map[string]string{
		"standardNCFamily":      "2023-08-31",
		"standardNCSv2Family":   "2023-08-31",
		"standardNDSFamily":     "2023-08-31",
		"standardNVFamily":      "2023-08-31",
		"standardNVPromoFamily": "2023-08-31",
		"basicAFamily":          "2024-08-31",
		"standardA0_A7Family":   "2024-08-31",
		"standardHBSFamily":     "2024-08-31",
	}
	retired := 0
	for _, s := range Sizes() {
		want, familyRetired := retiredFamilies[s.Family]
		if s.RetiredOn != want {
			t.Errorf("%s (%s): retired_on %q, want %q", s.Name, s.Family, s.RetiredOn, want)
		}
		if !s.Retired() {
			if s.Successor != "" {
				t.Errorf("%s: current size with successor %q", s.Name, s.Successor)
			}
			continue
		}
		retired++
		if !familyRetired {
			t.Errorf("%s: retired but its family %s is not a retired one", s.Name, s.Family)
		}
		succ, ok := Lookup(s.Successor)
		switch {
		case !ok:
			t.Errorf("%s: successor %q is not in the catalog", s.Name, s.Successor)
		case succ.Name != s.Successor:
			t.Errorf("%s: successor %q is not canonically spelled (%q)", s.Name, s.Successor, succ.Name)
		case succ.Retired():
			t.Errorf("%s: successor %s is retired too", s.Name, succ.Name)
		case succ.GPUs == 0 && s.GPUs > 0:
			t.Errorf("%s: GPU size succeeded by CPU size %s", s.Name, succ.Name)
		}
	}
	if retired != 27 {
		t.Errorf("%d retired sizes, want 27 (NC 4, NCv2 4, ND 4, NV 3, NV_Promo 3, Basic A 4, A 4, HB 1)", retired)
	}
	successors := map[string]string{
		"Standard_NC6":        "Standard_NC4as_T4_v3",
		"Standard_NC24r":      "Standard_NC64as_T4_v3",
		"Standard_NC6s_v2":    "Standard_NC24ads_A100_v4",
		"Standard_ND24rs":     "Standard_ND96amsr_A100_v4",
		"Standard_NV6":        "Standard_NV12s_v3",
		"Standard_A1":         "Standard_A1_v2",
		"Basic_A4":            "Standard_A8_v2",
		"Standard_HB60rs":     "Standard_HB120rs_v3",
		"Standard_NV24_Promo": "Standard_NV48s_v3",
	}
	for name, want := range successors {
		if got := mustLookup(t, name).Successor; got != want {
			t.Errorf("%s: successor %q, want %q", name, got, want)
		}
	}
}

func TestFamilies(t *testing.T) {
	tests := []struct {
		name     string
		quota    int64
		approval bool
	}{
		{"standardDFamily", 100, false},
		{"standardDv2Family", 100, false},
		{"standardDSv2Family", 100, false},
		{"standardFSv2Family", 100, false},
		{"standardAv2Family", 100, false},
		{"standardMSFamily", 0, true},
		{"standardNCSv3Family", 0, true},
		{"standardNDSv2Family", 0, true},
		{"standardNVSv3Family", 0, true},
		{"standardNCASv3_T4Family", 0, true},
		{"standardNCADSA100v4Family", 0, true},
		{"standardNDASv4_A100Family", 0, true},
		{"standardNDAMSv4_A100Family", 0, true},
		{"standardNDSH100v5Family", 0, true},
		{"standardHBv3Family", 0, true},
		{"standardNCFamily", 0, false},
		{"standardNCSv2Family", 0, false},
		{"standardNDSFamily", 0, false},
		{"standardNVFamily", 0, false},
		{"standardNVPromoFamily", 0, false},
		{"basicAFamily", 0, false},
		{"standardA0_A7Family", 0, false},
		{"standardHBSFamily", 0, false},
	}
	for _, tt := range tests {
		f, ok := LookupFamily(tt.name)
		if !ok || f.Name != tt.name || f.DefaultQuota != tt.quota || f.RequiresApproval != tt.approval {
			t.Errorf("LookupFamily(%q) = %+v, %v; want quota %d, approval %v", tt.name, f, ok, tt.quota, tt.approval)
		}
	}
	if got := len(Families()); got != len(tests) {
		t.Errorf("%d families, want %d", got, len(tests))
	}

	hasSizes := map[string]bool{}
	for _, s := range Sizes() {
		hasSizes[s.Family] = true
	}
	for _, f := range Families() {
		if f.RequiresApproval && f.DefaultQuota != 0 {
			t.Errorf("%s requires approval but has default quota %d", f.Name, f.DefaultQuota)
		}
		if !hasSizes[f.Name] {
			t.Errorf("%s has no sizes", f.Name)
		}
	}
	// Every current GPU family requires approval.
	for _, s := range List(Filter{MinGPUs: 1}) {
		if !s.RequiresApproval {
			t.Errorf("%s: current GPU size in a family without approval", s.Name)
		}
	}

	if f, ok := LookupFamily("STANDARDncsV3family"); !ok || f.Name != "standardNCSv3Family" {
		t.Errorf("LookupFamily is not case-insensitive: %+v, %v", f, ok)
	}
	for _, bad := range []string{"", "standardNCSv3", "Standard NCSv3 Family", " standardNCSv3Family"} {
		if f, ok := LookupFamily(bad); ok {
			t.Errorf("LookupFamily(%q) = %+v, want nothing", bad, f)
		}
	}
}

func TestIsolated(t *testing.T) {
	iso := Isolated()
	want := []string{"Standard_F72s_v2", "Standard_M128ms", "Standard_NC24rs_v3", "Standard_NC24s_v3"}
	if got := names(iso); !slices.Equal(got, want) {
		t.Errorf("Isolated() = %v, want %v", got, want)
	}
	for _, s := range iso {
		if !s.Isolated || s.Retired() {
			t.Errorf("%s: isolated %v, retired %v", s.Name, s.Isolated, s.Retired())
		}
	}
	for _, s := range Sizes() {
		if s.Isolated != slices.Contains(want, s.Name) {
			t.Errorf("%s: isolated %v", s.Name, s.Isolated)
		}
	}
	if !mustLookup(t, "Standard_NC24rs_v3").RDMACapable {
		t.Error("Standard_NC24rs_v3 must be RDMA capable")
	}
}

func TestComputeTypeSupport(t *testing.T) {
	tests := []struct {
		name string
		want []ComputeType
	}{
		{"Standard_D1_v2", []ComputeType{ComputeCluster, ComputeInstance}},
		{"Standard_DS1_v2", []ComputeType{ComputeCluster, ComputeInstance, OnlineDeployment}},
		{"Standard_DS11_v2", []ComputeType{ComputeCluster, ComputeInstance}},
		{"Standard_F2s_v2", []ComputeType{ComputeCluster, ComputeInstance, OnlineDeployment}},
		{"Standard_M128ms", []ComputeType{ComputeCluster, ComputeInstance}},
		{"Standard_NC24s_v3", []ComputeType{ComputeCluster, ComputeInstance, OnlineDeployment}},
		{"Standard_NC24rs_v3", []ComputeType{ComputeCluster, ComputeInstance}},
		{"Standard_ND96isr_H100_v5", []ComputeType{ComputeCluster, ComputeInstance, OnlineDeployment}},
		{"Standard_NV12s_v3", []ComputeType{ComputeCluster, ComputeInstance}},
		{"Basic_A1", []ComputeType{ComputeInstance}},
	}
	for _, tt := range tests {
		s := mustLookup(t, tt.name)
		if !slices.Equal(s.SupportedComputeTypes, tt.want) {
			t.Errorf("%s supports %v, want %v", tt.name, s.SupportedComputeTypes, tt.want)
		}
		for _, ct := range ComputeTypes() {
			if s.Supports(ct) != slices.Contains(tt.want, ct) {
				t.Errorf("%s.Supports(%s) = %v", tt.name, ct, s.Supports(ct))
			}
		}
		if s.Supports("") || s.Supports("computecluster") {
			t.Errorf("%s.Supports accepts a non-canonical type", tt.name)
		}
	}
	// Exactly the sizes on Azure's managed online endpoint SKU list support OnlineDeployment.
	wantOnline := []string{
		"Standard_DS1_v2", "Standard_DS2_v2", "Standard_DS3_v2", "Standard_DS4_v2", "Standard_DS5_v2",
		"Standard_F16s_v2", "Standard_F2s_v2", "Standard_F32s_v2", "Standard_F48s_v2", "Standard_F4s_v2",
		"Standard_F64s_v2", "Standard_F72s_v2", "Standard_F8s_v2",
		"Standard_NC12s_v2", "Standard_NC12s_v3", "Standard_NC16as_T4_v3", "Standard_NC24ads_A100_v4",
		"Standard_NC24s_v2", "Standard_NC24s_v3", "Standard_NC48ads_A100_v4", "Standard_NC4as_T4_v3",
		"Standard_NC64as_T4_v3", "Standard_NC6s_v2", "Standard_NC6s_v3", "Standard_NC8as_T4_v3",
		"Standard_NC96ads_A100_v4", "Standard_ND40rs_v2", "Standard_ND96amsr_A100_v4", "Standard_ND96asr_v4",
		"Standard_ND96isr_H100_v5",
	}
	if got := names(List(Filter{ComputeType: OnlineDeployment, IncludeRetired: true})); !slices.Equal(got, wantOnline) {
		t.Errorf("sizes supporting OnlineDeployment:\n got %v\nwant %v", got, wantOnline)
	}
	for _, s := range List(Filter{}) {
		if !s.Supports(ComputeCluster) || !s.Supports(ComputeInstance) {
			t.Errorf("%s: current sizes must support ComputeCluster and ComputeInstance, got %v", s.Name, s.SupportedComputeTypes)
		}
	}
}

func TestComputeTypes(t *testing.T) {
	want := []ComputeType{"ComputeCluster", "ComputeInstance", "OnlineDeployment"}
	got := ComputeTypes()
	if !slices.Equal(got, want) {
		t.Fatalf("ComputeTypes() = %v, want %v", got, want)
	}
	got[0] = "mutated"
	if ComputeTypes()[0] != ComputeCluster {
		t.Error("ComputeTypes shares its slice with callers")
	}
	for _, tt := range []struct {
		in   string
		want ComputeType
		ok   bool
	}{
		{"ComputeCluster", ComputeCluster, true},
		{"computeinstance", ComputeInstance, true},
		{"ONLINEDEPLOYMENT", OnlineDeployment, true},
		{"", "", false},
		{"Kubernetes", "", false},
		{" ComputeCluster", "", false},
	} {
		got, ok := ParseComputeType(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseComputeType(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok && !got.Valid() {
			t.Errorf("%q not Valid", got)
		}
	}
	if ComputeType("computecluster").Valid() || ComputeType("").Valid() {
		t.Error("Valid accepts non-canonical types")
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		in, want string // want "" = not found
	}{
		{"Standard_NC6s_v3", "Standard_NC6s_v3"},
		{"standard_nc6S_V3", "Standard_NC6s_v3"},
		{"STANDARD_ND96ISR_H100_V5", "Standard_ND96isr_H100_v5"},
		{"basic_a1", "Basic_A1"},
		{"standard_nc6", "Standard_NC6"}, // retired sizes are still known
		{"NC6s_v3", ""},
		{"Standard_NC6s_v4", ""},
		{" Standard_NC6s_v3", ""},
		{"", ""},
	}
	for _, tt := range tests {
		s, ok := Lookup(tt.in)
		if ok != (tt.want != "") || s.Name != tt.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tt.in, s.Name, ok, tt.want)
		}
	}
}

func TestCallersCannotMutateCatalog(t *testing.T) {
	s := mustLookup(t, "Standard_D1_v2")
	s.SupportedComputeTypes[0] = OnlineDeployment
	s.VCPUs = 999

	all := Sizes()
	for i := range all {
		all[i].SupportedComputeTypes[0] = "mutated"
		all[i].Name = "mutated"
	}
	for _, l := range [][]Size{List(Filter{}), Isolated()} {
		for i := range l {
			l[i].SupportedComputeTypes[0] = "mutated"
		}
	}
	fams := Families()
	fams[0].DefaultQuota = 12345

	again := mustLookup(t, "Standard_D1_v2")
	if again.VCPUs != 1 || again.SupportedComputeTypes[0] != ComputeCluster {
		t.Errorf("catalog changed through a returned value: %+v", again)
	}
	for _, s := range Sizes() {
		if s.Name == "mutated" || s.SupportedComputeTypes[0] == "mutated" {
			t.Fatalf("catalog changed through Sizes()/List()/Isolated(): %+v", s)
		}
	}
	if Families()[0].DefaultQuota == 12345 {
		t.Error("catalog changed through Families()")
	}
}

func TestList(t *testing.T) {
	tests := []struct {
		name   string
		filter Filter
		keep   func(Size) bool // the filter's meaning, written independently of List
		in     []string
		out    []string
	}{
		{
			name:   "zero filter lists current sizes",
			filter: Filter{},
			keep:   func(s Size) bool { return s.RetiredOn == "" },
			in:     []string{"Standard_D1_v2", "Standard_M128ms", "Standard_ND96isr_H100_v5"},
			out:    []string{"Standard_NC6", "Standard_NV6_Promo", "Basic_A1", "Standard_A1", "Standard_HB60rs"},
		},
		{
			name:   "include retired",
			filter: Filter{IncludeRetired: true},
			keep:   func(Size) bool { return true },
			in:     []string{"Standard_D1_v2", "Standard_NC6", "Basic_A1", "Standard_HB60rs"},
		},
		{
			name:   "compute type",
			filter: Filter{ComputeType: OnlineDeployment},
			keep: func(s Size) bool {
				return s.RetiredOn == "" && slices.Contains(s.SupportedComputeTypes, OnlineDeployment)
			},
			in:  []string{"Standard_DS1_v2", "Standard_F2s_v2", "Standard_NC6s_v3", "Standard_ND96asr_v4"},
			out: []string{"Standard_D1_v2", "Standard_DS11_v2", "Standard_M128ms", "Standard_NC24rs_v3", "Standard_NC6s_v2"},
		},
		{
			name:   "compute type with retired",
			filter: Filter{ComputeType: OnlineDeployment, IncludeRetired: true},
			keep:   func(s Size) bool { return slices.Contains(s.SupportedComputeTypes, OnlineDeployment) },
			in:     []string{"Standard_NC6s_v2", "Standard_DS1_v2"},
			out:    []string{"Standard_NC24rs_v2", "Basic_A1"},
		},
		{
			name:   "unknown compute type matches nothing",
			filter: Filter{ComputeType: "Kubernetes"},
			keep:   func(Size) bool { return false },
		},
		{
			name:   "family, case-insensitive",
			filter: Filter{Family: "STANDARDNCSV3FAMILY"},
			keep:   func(s Size) bool { return s.Family == "standardNCSv3Family" },
			in:     []string{"Standard_NC6s_v3", "Standard_NC12s_v3", "Standard_NC24s_v3", "Standard_NC24rs_v3"},
			out:    []string{"Standard_NC6s_v2", "Standard_NC4as_T4_v3", "Standard_ND40rs_v2"},
		},
		{
			name:   "retired family is empty by default",
			filter: Filter{Family: "standardNCSv2Family"},
			keep:   func(Size) bool { return false },
			out:    []string{"Standard_NC6s_v2"},
		},
		{
			name:   "retired family with retired",
			filter: Filter{Family: "standardNCSv2Family", IncludeRetired: true},
			keep:   func(s Size) bool { return s.Family == "standardNCSv2Family" },
			in:     []string{"Standard_NC6s_v2", "Standard_NC12s_v2", "Standard_NC24s_v2", "Standard_NC24rs_v2"},
		},
		{
			name:   "unknown family matches nothing",
			filter: Filter{Family: "standardNoSuchFamily"},
			keep:   func(Size) bool { return false },
		},
		{
			name:   "min vCPUs",
			filter: Filter{MinVCPUs: 64},
			keep:   func(s Size) bool { return s.RetiredOn == "" && s.VCPUs >= 64 },
			in:     []string{"Standard_F64s_v2", "Standard_F72s_v2", "Standard_M64s", "Standard_M128ms", "Standard_NC64as_T4_v3"},
			out:    []string{"Standard_F48s_v2", "Standard_M32ms", "Standard_ND40rs_v2", "Standard_HB60rs"},
		},
		{
			name:   "min memory",
			filter: Filter{MinMemoryGB: 1000},
			keep:   func(s Size) bool { return s.RetiredOn == "" && s.MemoryGB >= 1000 },
			in:     []string{"Standard_M64s", "Standard_M128ms", "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5"},
			out:    []string{"Standard_M32ms", "Standard_ND96asr_v4", "Standard_ND40rs_v2", "Standard_F72s_v2"},
		},
		{
			name:   "fractional min memory",
			filter: Filter{MinMemoryGB: 218.75},
			keep:   func(s Size) bool { return s.RetiredOn == "" && s.MemoryGB >= 218.75 },
			in:     []string{"Standard_M8ms", "Standard_NC24ads_A100_v4"},
			out:    []string{"Standard_NC16as_T4_v3", "Standard_D14_v2"},
		},
		{
			name:   "GPU sizes (sizes list --gpu)",
			filter: Filter{MinGPUs: 1},
			keep:   func(s Size) bool { return s.RetiredOn == "" && s.GPUs >= 1 },
			in:     []string{"Standard_NC4as_T4_v3", "Standard_NV12s_v3", "Standard_ND96isr_H100_v5", "Standard_NC6s_v3"},
			out:    []string{"Standard_D1_v2", "Standard_M128ms", "Standard_NC6", "Standard_HB120rs_v3"},
		},
		{
			name:   "min GPUs 8",
			filter: Filter{MinGPUs: 8},
			keep:   func(s Size) bool { return s.RetiredOn == "" && s.GPUs >= 8 },
			in:     []string{"Standard_ND40rs_v2", "Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5"},
			out:    []string{"Standard_NC24s_v3", "Standard_NC96ads_A100_v4"},
		},
		{
			name: "all conditions together",
			filter: Filter{ComputeType: OnlineDeployment, Family: "standardncasv3_t4family", MinVCPUs: 8,
				MinMemoryGB: 56, MinGPUs: 1},
			keep: func(s Size) bool {
				return s.Family == "standardNCASv3_T4Family" && s.VCPUs >= 8
			},
			in:  []string{"Standard_NC8as_T4_v3", "Standard_NC16as_T4_v3", "Standard_NC64as_T4_v3"},
			out: []string{"Standard_NC4as_T4_v3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(List(tt.filter))
			var want []string
			for _, s := range Sizes() {
				if tt.keep(s) {
					want = append(want, s.Name)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("List(%+v):\n got %v\nwant %v", tt.filter, got, want)
			}
			for _, n := range tt.in {
				if !slices.Contains(got, n) {
					t.Errorf("%s missing", n)
				}
			}
			for _, n := range tt.out {
				if slices.Contains(got, n) {
					t.Errorf("%s should be filtered out", n)
				}
			}
		})
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name       string
		size       string
		ct         ComputeType
		want       string   // canonical name on success
		reason     string   // SizeError.Reason on failure
		msgHas     []string // substrings of the message
		suggestion string
	}{
		{name: "ok", size: "Standard_NC6s_v3", ct: ComputeCluster, want: "Standard_NC6s_v3"},
		{name: "canonicalizes", size: "standard_nc6S_V3", ct: OnlineDeployment, want: "Standard_NC6s_v3"},
		{name: "any compute type", size: "STANDARD_M128MS", want: "Standard_M128ms"},
		{
			name: "retired NC", size: "Standard_NC6", ct: ComputeCluster, reason: ReasonRetired,
			msgHas:     []string{`VM size "Standard_NC6" was retired on 2023-08-31; use "Standard_NC4as_T4_v3" instead`},
			suggestion: "Standard_NC4as_T4_v3",
		},
		{
			name: "retired, canonical name in message", size: "standard_nd24rs", ct: ComputeInstance, reason: ReasonRetired,
			msgHas:     []string{`"Standard_ND24rs"`, "2023-08-31", `"Standard_ND96amsr_A100_v4"`},
			suggestion: "Standard_ND96amsr_A100_v4",
		},
		{
			name: "retired Av1", size: "Basic_A1", ct: ComputeInstance, reason: ReasonRetired,
			msgHas: []string{"2024-08-31", `"Standard_A1_v2"`}, suggestion: "Standard_A1_v2",
		},
		{
			name: "retired HB without compute type", size: "Standard_HB60rs", reason: ReasonRetired,
			msgHas: []string{"2024-08-31", `"Standard_HB120rs_v3"`}, suggestion: "Standard_HB120rs_v3",
		},
		{
			name: "retired wins over unsupported", size: "Standard_NC24rs_v2", ct: OnlineDeployment, reason: ReasonRetired,
			msgHas: []string{"2023-08-31", "Standard_NC96ads_A100_v4"}, suggestion: "Standard_NC96ads_A100_v4",
		},
		{
			name: "unsupported", size: "Standard_M128ms", ct: OnlineDeployment, reason: ReasonUnsupported,
			msgHas: []string{`VM size "Standard_M128ms" does not support OnlineDeployment; it supports ComputeCluster, ComputeInstance`},
		},
		{
			name: "unsupported NC24rs_v3", size: "standard_nc24rs_v3", ct: OnlineDeployment, reason: ReasonUnsupported,
			msgHas: []string{`"Standard_NC24rs_v3"`, "does not support OnlineDeployment"},
		},
		{
			name: "invalid compute type", size: "Standard_D1_v2", ct: "Kubernetes", reason: ReasonUnsupported,
			msgHas: []string{`unknown compute type "Kubernetes"`, "ComputeCluster, ComputeInstance, OnlineDeployment"},
		},
		{
			name: "unknown", size: "Standard_Foo", ct: ComputeCluster, reason: ReasonUnknown,
			msgHas: []string{`unknown VM size "Standard_Foo"`, "mlcompute_vm_sizes", "'mlcompute sizes list'"},
		},
		{
			name: "unknown with typo", size: "Standard_NC6s_v4", ct: ComputeCluster, reason: ReasonUnknown,
			msgHas: []string{`(did you mean "Standard_NC6s_v3"?)`}, suggestion: "Standard_NC6s_v3",
		},
		{
			name: "unknown without prefix", size: "nd96isr_h100_v5", reason: ReasonUnknown,
			msgHas: []string{`did you mean "Standard_ND96isr_H100_v5"`}, suggestion: "Standard_ND96isr_H100_v5",
		},
		{
			name: "unknown with spaces", size: " Standard_D2_v2 ", reason: ReasonUnknown,
			suggestion: "Standard_D2_v2",
		},
		{name: "empty", size: "", ct: ComputeCluster, reason: ReasonUnknown, msgHas: []string{"must not be empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(tt.size, tt.ct)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Resolve(%q, %q): %v", tt.size, tt.ct, err)
				}
				if s.Name != tt.want {
					t.Errorf("Resolve(%q) = %q, want %q", tt.size, s.Name, tt.want)
				}
				return
			}
			var se *SizeError
			if !errors.As(err, &se) {
				t.Fatalf("Resolve(%q, %q) = %+v, %v; want a *SizeError", tt.size, tt.ct, s, err)
			}
			if se.Reason != tt.reason {
				t.Errorf("reason %q, want %q (%s)", se.Reason, tt.reason, se.Msg)
			}
			if se.Error() != se.Msg {
				t.Errorf("Error() %q differs from Msg %q", se.Error(), se.Msg)
			}
			for _, sub := range tt.msgHas {
				if !strings.Contains(se.Msg, sub) {
					t.Errorf("message %q lacks %q", se.Msg, sub)
				}
			}
			if se.Suggestion != tt.suggestion {
				t.Errorf("suggestion %q, want %q", se.Suggestion, tt.suggestion)
			}
			if s.Name != "" {
				t.Errorf("a failed Resolve returned size %q", s.Name)
			}
		})
	}
}

func TestResolveEveryCurrentSize(t *testing.T) {
	for _, s := range Sizes() {
		for _, ct := range ComputeTypes() {
			got, err := Resolve(strings.ToUpper(s.Name), ct)
			switch {
			case s.Retired():
				var se *SizeError
				if !errors.As(err, &se) || se.Reason != ReasonRetired || !strings.Contains(se.Msg, s.RetiredOn) || !strings.Contains(se.Msg, s.Successor) {
					t.Errorf("Resolve(%s, %s) = %v; want retired naming %s and %s", s.Name, ct, err, s.RetiredOn, s.Successor)
				}
			case s.Supports(ct):
				if err != nil || got.Name != s.Name {
					t.Errorf("Resolve(%s, %s) = %q, %v", s.Name, ct, got.Name, err)
				}
			default:
				var se *SizeError
				if !errors.As(err, &se) || se.Reason != ReasonUnsupported {
					t.Errorf("Resolve(%s, %s) = %v; want unsupported", s.Name, ct, err)
				}
			}
		}
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Standard_DS2v2", "Standard_DS2_v2"},
		{"Standard_F8s_V3", "Standard_F8s_v2"},
		{"Standard_NC24ads_A100_v5", "Standard_NC24ads_A100_v4"},
		{"NC4as_T4_v3", "Standard_NC4as_T4_v3"},
		{"standard_d1_v2", "Standard_D1_v2"},
		{"nc6s_v4", "Standard_NC6s_v3"},
		{"Standard_NC6_v3", "Standard_NC6s_v3"},
		{"Standard_NC12s_v4", "Standard_NC12s_v3"}, // current Standard_NC12s_v3 beats retired Standard_NC12s_v2
		{"Standard_Foo", ""},
		{"p3.2xlarge", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Suggest(tt.in); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWireForm(t *testing.T) {
	b, err := json.Marshal(mustLookup(t, "Standard_NC6"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"Standard_NC6"`, `"family":"standardNCFamily"`, `"gpu_model":"NVIDIA Tesla K80"`,
		`"os_vhd_size_mb":1047552`, `"supported_compute_types":["ComputeCluster","ComputeInstance"]`,
		`"retired_on":"2023-08-31"`, `"successor":"Standard_NC4as_T4_v3"`, `"requires_approval":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	b, _ = json.Marshal(mustLookup(t, "Standard_NC6s_v3"))
	if strings.Contains(string(b), "retired_on") || strings.Contains(string(b), "successor") ||
		!strings.Contains(string(b), `"requires_approval":true`) {
		t.Errorf("current size JSON: %s", b)
	}
	var back Size
	if err := json.Unmarshal(b, &back); err != nil || back.Name != "Standard_NC6s_v3" || back.Retired() {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestAsOf(t *testing.T) {
	if AsOf() != "2026-11-21" {
		t.Errorf("AsOf() = %q", AsOf())
	}
}

// load must refuse data the package cannot serve correctly.
func TestLoadRejectsBadData(t *testing.T) {
	const fams = `"families": [
		{"name": "standardDv2Family", "default_quota": 100, "requires_approval": false},
		{"name": "standardNCFamily", "default_quota": 0, "requires_approval": false}]`
	size := func(fields string) string {
		return `{"name": "Standard_D1_v2", "family": "standardDv2Family", "vcpus": 1, "gpus": 0, "gpu_model": "",
			"memory_gb": 3.5, "os_vhd_size_mb": 1047552, "max_resource_volume_mb": 51200,
			"low_priority_capable": true, "premium_io": false,
			"supported_compute_types": ["ComputeCluster", "ComputeInstance"], "isolated": false, "rdma_capable": false` + fields + `}`
	}
	doc := func(families string, sizes ...string) string {
		return `{"as_of": "2026-11-21", ` + families + `, "sizes": [` + strings.Join(sizes, ",") + `]}`
	}
	retired := func(name, successor string) string {
		return strings.Replace(size(`, "retired_on": "2023-08-31", "successor": "`+successor+`"`),
			`"Standard_D1_v2", "family": "standardDv2Family"`, `"`+name+`", "family": "standardNCFamily"`, 1)
	}
	if _, err := load([]byte(doc(fams, size(""), retired("Standard_NC6", "Standard_D1_v2")))); err != nil {
		t.Fatalf("the valid base document was refused: %v", err)
	}
	tests := []struct {
		name, doc, errHas string
	}{
		{"bad JSON", `{`, "EOF"},
		{"unknown field", doc(fams, size(`, "colour": "blue"`)), "colour"},
		{"bad as_of", strings.Replace(doc(fams, size("")), "2026-11-21", "21/11/2026", 1), "as_of"},
		{"duplicate size in another case", doc(fams, size(""), strings.Replace(size(""), "Standard_D1_v2", "standard_d1_V2", 1)), "twice"},
		{"duplicate family", doc(strings.Replace(fams, "standardNCFamily", "STANDARDdv2family", 1), size("")), "twice"},
		{"unknown family", doc(fams, strings.Replace(size(""), "standardDv2Family", "standardDv9Family", 1)), "unknown family"},
		{"family misspelled", doc(fams, strings.Replace(size(""), `"standardDv2Family"`, `"StandardDV2Family"`, 1)), "spelled"},
		{"approval with quota", doc(strings.Replace(fams, `100, "requires_approval": false`, `100, "requires_approval": true`, 1), size("")), "default_quota must be 0"},
		{"zero vcpus", doc(fams, strings.Replace(size(""), `"vcpus": 1`, `"vcpus": 0`, 1)), "vcpus"},
		{"GPU without model", doc(fams, strings.Replace(size(""), `"gpus": 0`, `"gpus": 1`, 1)), "gpu_model"},
		{"no compute types", doc(fams, strings.Replace(size(""), `"ComputeCluster", "ComputeInstance"`, ``, 1)), "empty"},
		{"bad compute type", doc(fams, strings.Replace(size(""), `"ComputeInstance"`, `"Kubernetes"`, 1)), "Kubernetes"},
		{"compute types out of order", doc(fams, strings.Replace(size(""), `"ComputeCluster", "ComputeInstance"`, `"ComputeInstance", "ComputeCluster"`, 1)), "order"},
		{"successor missing", doc(fams, size(""), retired("Standard_NC6", "Standard_D2_v2")), "not in the catalog"},
		{"successor miscased", doc(fams, size(""), retired("Standard_NC6", "standard_d1_v2")), "spelled"},
		{"successor retired", doc(fams, retired("Standard_NC6", "Standard_NC12"), retired("Standard_NC12", "Standard_NC6")), "retired too"},
		{"retired without successor", doc(fams, size(""), retired("Standard_NC6", "")), "needs a successor"},
		{"bad retired_on", doc(fams, size(""), strings.Replace(retired("Standard_NC6", "Standard_D1_v2"), "2023-08-31", "2023-8-31", 1)), "retired_on"},
		{"successor on a current size", doc(fams, size(`, "successor": "Standard_D1_v2"`)), "not retired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("load: %v; want an error containing %q", err, tt.errHas)
			}
		})
	}
}
