// Pinned build of vmagent (VictoriaMetrics), the sidecar that forwards Agave's InfluxDB datapoints to Prometheus; the lab runs it as a real process (see hack/tools/build.sh).
module valtune.dev/hack/tools/vmagent

go 1.24.0

tool github.com/VictoriaMetrics/VictoriaMetrics/app/vmagent

require (
	cloud.google.com/go/compute/metadata v0.6.0 // indirect
	github.com/VictoriaMetrics/VictoriaMetrics v1.110.0 // indirect
	github.com/VictoriaMetrics/easyproto v0.1.4 // indirect
	github.com/VictoriaMetrics/fastcache v1.12.2 // indirect
	github.com/VictoriaMetrics/metrics v1.35.1 // indirect
	github.com/VictoriaMetrics/metricsql v0.82.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/golang/snappy v0.0.4 // indirect
	github.com/klauspost/compress v1.17.11 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fastjson v1.6.4 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	github.com/valyala/gozstd v1.21.2 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	github.com/valyala/quicktemplate v1.8.0 // indirect
	golang.org/x/net v0.34.0 // indirect
	golang.org/x/oauth2 v0.25.0 // indirect
	golang.org/x/sys v0.29.0 // indirect
	golang.org/x/text v0.21.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)
