// Command coredns is the DNS server of guest clusters on real nodes: CoreDNS, built from the
// module proxy at the version go.mod pins, with only the plugins its Corefile
// (pkg/addons) uses, so none of CoreDNS's cloud DNS backends is compiled in. This is CoreDNS's
// documented way to build with a chosen plugin set: import the plugins, list their
// directives in the order they run, call coremain.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the plugins' names in the order CoreDNS runs them: the relative order of
// CoreDNS's own plugin.cfg, whatever order a Corefile lists them in.
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache",
	"kubernetes", "loop", "forward",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
