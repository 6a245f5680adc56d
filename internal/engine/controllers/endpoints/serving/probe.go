package serving

import (
	"context"
	"net/http"
	"time"
)

// Prober performs one HTTP probe: it reports whether a GET of url answered 2xx or 3xx
// within timeout.
type Prober func(ctx context.Context, url string, timeout time.Duration) bool

// HTTPProbe is the engine's probe of a serving process: a GET with no proxy and no
// keep-alive, so a probe never holds one of the instance's request slots, and no redirect
// followed (a 3xx answer is the process's own, and passes).
func HTTPProbe(ctx context.Context, url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.Close = true
	res, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode >= 200 && res.StatusCode < 400
}

var probeClient = &http.Client{
	Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}
