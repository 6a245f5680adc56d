// Package catalog is the VM size catalog: every VM size and VM family the engine knows,
// embedded from catalog.json. The engine uses it to validate compute at create time and to
// check quota, the Terraform provider for plan-time validation and the mlcompute_vm_sizes
// and mlcompute_isolated_vm_sizes data sources, and the CLI for 'mlcompute sizes list'.
//
// # Source
//
// The data follows Azure's published tables as of the date AsOf returns (2026-11-21):
//
//   - vCPUs, memory (GiB), GPUs and temp storage: the per-series pages of "Sizes for
//     virtual machines in Azure" (learn.microsoft.com/azure/virtual-machines/sizes).
//     MaxResourceVolumeMB is the published temp (SSD) storage in GiB times 1024; local NVMe
//     disks (NC A100 v4) are not counted. OSVhdSizeMB is Azure Machine Learning's standard
//     OS disk, 1047552 MB, for every size.
//   - Family names: Azure's spelling in its vCPU usage and quota list (the "family" of
//     the Compute resource SKUs), e.g. standardNCASv3_T4Family, standardNDASv4_A100Family.
//   - Retirements: the Azure Machine Learning compute-target page, which lists NC, NCv2, ND,
//     NV and NV_Promo as retired on 2023-08-31 (the VM pages say 2023-09-06; Azure ML
//     stopped accepting them on the earlier date) and Av1 and HB as retired on 2024-08-31.
//     Successors follow Azure's migration guides, restricted to sizes in this catalog:
//     NC and ND to NCasT4_v3 (ND24rs to ND96amsr_A100_v4), NCv2 to NC A100 v4, NV to
//     NVv3, Av1 to Av2 and HB to HBv3.
//   - Isolation: Azure Machine Learning's isolated VM sizes (Standard_M128ms,
//     Standard_F72s_v2, Standard_NC24s_v3, Standard_NC24rs_v3).
//
// Azure has also announced the retirement of NCv3 (2025-09-30). This catalog still lists
// NCv3 as current, by project decision: the isolated sizes above include two NCv3 sizes.
//
// # Rules
//
// Quota. Each family has a default regional vCPU quota. General-purpose and
// compute-optimized families (A v2, D, Dv2, DSv2, FSv2) get 100 vCPUs. Families that
// require approval start at 0 and need a quota request: every current GPU family (NCv3,
// NDv2, NVv3, NCasT4_v3, NC A100 v4, ND A100 v4, NDm A100 v4, ND H100 v5), the M-series
// (standardMSFamily) and the HPC family HBv3. Retired families have a default of 0 and do
// not require approval, since no quota is granted for them at all. A family that requires
// approval always has a default of 0; Size.RequiresApproval is copied from the family.
//
// Compute types. Every current size supports ComputeCluster and ComputeInstance, as Azure
// Machine Learning's supported-series table says. OnlineDeployment (managed online
// endpoints) is supported exactly by the sizes on Azure's managed online endpoint SKU list:
// DS1_v2 to DS5_v2, all FSv2, NC6s_v3 to NC24s_v3, all NCasT4_v3, all NC A100 v4,
// ND40rs_v2, ND96asr_v4, ND96amsr_A100_v4 and ND96isr_H100_v5 (so not D, Dv2, DS11_v2 to
// DS15_v2, M, NVv3, Av2, HBv3 or NC24rs_v3). Retired sizes keep the types they had; the
// Basic A sizes supported ComputeInstance only.
//
// Flags. PremiumIO follows Azure's naming: sizes with an "s" feature letter (DSv2, FSv2, M,
// NCv2, NCv3, ND, NDv2, NVv3, T4, A100, H100, HB) support premium storage. RDMACapable is
// set on the InfiniBand sizes, those with an "r" feature letter. LowPriorityCapable is
// true for current sizes except the M-series, and false for retired ones.
//
// # Adding a size
//
// Add one line to the "sizes" array of catalog.json next to its series, with the fields
// of Size except requires_approval (taken from the family). Use Azure's exact spelling
// for the name and for the family, adding the family to "families" if it is new (with its
// default quota and approval rule as above). A retired size needs retired_on and a
// successor that is in the catalog and current. Update as_of (returned by AsOf) when you
// re-check the data against Azure, then run the package tests: the catalog is checked when
// it is loaded, and a bad entry makes the package panic at start-up and every test fail.
package catalog
