// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/urfave/cli/v2"
)

// simCluster is the cluster of `simulate --cluster FILE` (nil when the flag is
// not given: --nodes x --gpus-per-node) and its description for the report.
// The file is read as a configuration, so its cluster: section is validated as
// the plugin's would be; nothing else of it is used.
func simCluster(c *cli.Context) (*placement.Cluster, string, error) {
	path := c.String("cluster")
	if path == "" {
		return nil, "", nil
	}
	for _, f := range []string{"nodes", "gpus-per-node", "gpu-mem-mib"} {
		if c.IsSet(f) {
			return nil, "", usageErrorf("--cluster and --%s: the cluster file says how many GPUs of what memory each node has", f)
		}
	}
	fc, err := config.Load(path)
	if err != nil {
		return nil, "", fmt.Errorf("--cluster: %w", err)
	}
	cl, err := placeconf.Cluster(fc)
	if err != nil {
		return nil, "", fmt.Errorf("--cluster %s: %w", sanitize(path), err)
	}
	return cl, clusterSummary(fc.Cluster, cl), nil
}

// clusterSummary words a configured cluster by group: "3 groups, 12 nodes,
// 64 GPUs: 4 x 8 GPUs of 80 GiB (H100), ...".
func clusterSummary(spec config.ClusterSpec, cl *placement.Cluster) string {
	hosts, _ := spec.Hosts() // validated by the load
	perGroup := map[int]int{}
	for _, h := range hosts {
		perGroup[h.Group]++
	}
	groups := spec.NodeGroups()
	parts := make([]string, len(groups))
	for gi, g := range groups {
		parts[gi] = fmt.Sprintf("%d x %d GPUs of %.0f MiB", perGroup[gi], g.GPUsPerNode, g.GPUMemoryMiB)
		if g.GPUModel != "" {
			parts[gi] += " (" + sanitize(g.GPUModel) + ")"
		}
	}
	return fmt.Sprintf("%d groups, %d nodes, %d GPUs: %s", len(groups), len(cl.Nodes), cl.NumGPUs(), strings.Join(parts, ", "))
}
