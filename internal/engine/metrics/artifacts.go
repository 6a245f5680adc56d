package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	artifactBytesDesc = prometheus.NewDesc(Namespace+"_artifact_store_bytes",
		"Bytes the store of job outputs holds in the data dir (each content once, manifests included).", nil, nil)
	artifactBlobsDesc = prometheus.NewDesc(Namespace+"_artifact_store_blobs",
		"Blobs the store of job outputs holds: distinct file contents and output manifests.", nil, nil)
)

// ArtifactSource is what a Source offers, besides nodes and jobs, when it keeps a store of
// job outputs; *engine.Engine does.
type ArtifactSource interface {
	ArtifactUsage() (bytes int64, blobs int)
}

// artifactCollector reads the store's usage at scrape time.
type artifactCollector struct {
	src ArtifactSource
}

func (c *artifactCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- artifactBytesDesc
	ch <- artifactBlobsDesc
}

func (c *artifactCollector) Collect(ch chan<- prometheus.Metric) {
	bytes, blobs := c.src.ArtifactUsage()
	ch <- prometheus.MustNewConstMetric(artifactBytesDesc, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(artifactBlobsDesc, prometheus.GaugeValue, float64(blobs))
}
