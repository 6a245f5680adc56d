package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// This file is the one place that describes a VM size as Terraform sees it, shared by the
// mlcompute_vm_sizes and mlcompute_isolated_vm_sizes data sources. Values that do not apply
// to a size are null: gpu_model for a size without GPUs, retired_on for a current size.

// vmSizesAttribute is the computed `sizes` list attribute.
func vmSizesAttribute(description string) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		MarkdownDescription: description + " Sizes are sorted by name.",
		Computed:            true,
		NestedObject: schema.NestedAttributeObject{
			Attributes: map[string]schema.Attribute{
				"name": schema.StringAttribute{
					MarkdownDescription: "The size's name in the catalog's canonical spelling, for example `Standard_NC6s_v3`.",
					Computed:            true,
				},
				"family": schema.StringAttribute{
					MarkdownDescription: "The size's VM family as Azure spells it, the key of a workspace's `quotas`, for example `standardNCSv3Family`.",
					Computed:            true,
				},
				"vcpus": schema.Int64Attribute{
					MarkdownDescription: "The number of vCPUs, which is what quotas count.",
					Computed:            true,
				},
				"gpus": schema.Int64Attribute{
					MarkdownDescription: "The number of GPUs (`0` for a size without GPUs).",
					Computed:            true,
				},
				"gpu_model": schema.StringAttribute{
					MarkdownDescription: "The GPU model, for example `NVIDIA Tesla V100`; null for a size without GPUs.",
					Computed:            true,
				},
				"memory_gb": schema.Float64Attribute{
					MarkdownDescription: "The memory in GiB.",
					Computed:            true,
				},
				"os_vhd_size_mb": schema.Int64Attribute{
					MarkdownDescription: "The size of the OS disk in MB.",
					Computed:            true,
				},
				"max_resource_volume_mb": schema.Int64Attribute{
					MarkdownDescription: "The size of the temporary (resource) disk in MB.",
					Computed:            true,
				},
				"low_priority_capable": schema.BoolAttribute{
					MarkdownDescription: "Whether the size can run low-priority nodes (`vm_priority = \"LowPriority\"`).",
					Computed:            true,
				},
				"premium_io": schema.BoolAttribute{
					MarkdownDescription: "Whether the size supports premium storage.",
					Computed:            true,
				},
				"supported_compute_types": schema.ListAttribute{
					MarkdownDescription: "The compute types the size can back, in the order `ComputeCluster`, `ComputeInstance`, `OnlineDeployment`.",
					ElementType:         types.StringType,
					Computed:            true,
				},
				"requires_approval": schema.BoolAttribute{
					MarkdownDescription: "Whether the size's family requires approval: its default quota is 0, so a workspace must set one in `quotas` before using it.",
					Computed:            true,
				},
				"isolated": schema.BoolAttribute{
					MarkdownDescription: "Whether the size is isolated to a single customer's hardware.",
					Computed:            true,
				},
				"rdma_capable": schema.BoolAttribute{
					MarkdownDescription: "Whether the size has an RDMA (InfiniBand) network.",
					Computed:            true,
				},
				"retired_on": schema.StringAttribute{
					MarkdownDescription: "The date (`YYYY-MM-DD`) Azure retired the size; null for a current size. Retired sizes are listed only with `include_retired = true` and cannot be used for new computes.",
					Computed:            true,
				},
			},
		},
	}
}

// vmSizeModel is one element of `sizes`.
type vmSizeModel struct {
	Name                  types.String  `tfsdk:"name"`
	Family                types.String  `tfsdk:"family"`
	VCPUs                 types.Int64   `tfsdk:"vcpus"`
	GPUs                  types.Int64   `tfsdk:"gpus"`
	GPUModel              types.String  `tfsdk:"gpu_model"`
	MemoryGB              types.Float64 `tfsdk:"memory_gb"`
	OSVhdSizeMB           types.Int64   `tfsdk:"os_vhd_size_mb"`
	MaxResourceVolumeMB   types.Int64   `tfsdk:"max_resource_volume_mb"`
	LowPriorityCapable    types.Bool    `tfsdk:"low_priority_capable"`
	PremiumIO             types.Bool    `tfsdk:"premium_io"`
	SupportedComputeTypes []string      `tfsdk:"supported_compute_types"`
	RequiresApproval      types.Bool    `tfsdk:"requires_approval"`
	Isolated              types.Bool    `tfsdk:"isolated"`
	RDMACapable           types.Bool    `tfsdk:"rdma_capable"`
	RetiredOn             types.String  `tfsdk:"retired_on"`
}

// vmSizeModels converts sizes as the engine returned them.
func vmSizeModels(sizes []api.VMSize) []vmSizeModel {
	out := make([]vmSizeModel, len(sizes))
	for i, s := range sizes {
		computeTypes := make([]string, len(s.SupportedComputeTypes))
		for j, t := range s.SupportedComputeTypes {
			computeTypes[j] = string(t)
		}
		out[i] = vmSizeModel{
			Name:                  types.StringValue(s.Name),
			Family:                types.StringValue(s.Family),
			VCPUs:                 types.Int64Value(s.VCPUs),
			GPUs:                  types.Int64Value(s.GPUs),
			GPUModel:              nullIfEmpty(s.GPUModel),
			MemoryGB:              types.Float64Value(s.MemoryGB),
			OSVhdSizeMB:           types.Int64Value(s.OSVhdSizeMB),
			MaxResourceVolumeMB:   types.Int64Value(s.MaxResourceVolumeMB),
			LowPriorityCapable:    types.BoolValue(s.LowPriorityCapable),
			PremiumIO:             types.BoolValue(s.PremiumIO),
			SupportedComputeTypes: computeTypes,
			RequiresApproval:      types.BoolValue(s.RequiresApproval),
			Isolated:              types.BoolValue(s.Isolated),
			RDMACapable:           types.BoolValue(s.RDMACapable),
			RetiredOn:             nullIfEmpty(s.RetiredOn),
		}
	}
	return out
}

// nullIfEmpty maps the engine's "" (not applicable) to null.
func nullIfEmpty(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
