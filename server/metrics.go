package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/porthole/porthole/api"
)

// metrics are one gateway's Prometheus collectors, in their own registry (tests run many gateways).
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	websockets *prometheus.GaugeVec
	logins     *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "porthole_http_requests_total",
			Help: "HTTP requests by method, route and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "porthole_http_request_duration_seconds",
			Help:    "HTTP request duration by route (WebSockets excluded).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		websockets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "porthole_websockets_open",
			Help: "Open WebSockets by surface.",
		}, []string{"surface"}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "porthole_logins_total",
			Help: "Login attempts by result (ok, fail, limited).",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.websockets, m.logins,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range api.Surfaces {
		m.websockets.WithLabelValues(string(s))
	}
	for _, r := range []string{"ok", "fail", "limited"} {
		m.logins.WithLabelValues(r)
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observe is the outermost middleware: it renders errors (so the final status is known),
// counts the request, and logs it.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		if isUpgraded(c) {
			status = http.StatusSwitchingProtocols
		} else {
			s.metrics.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}
		s.metrics.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
		attrs := []any{
			"method", c.Request().Method, "route", route, "path", c.Request().URL.Path,
			"status", status, "dur_ms", time.Since(start).Milliseconds(), "remote", c.RealIP(),
		}
		if p := principalOf(c); p != nil {
			attrs = append(attrs, "actor", p.actor())
		}
		s.log.Info("http", attrs...)
		return nil
	}
}

const upgradedKey = "porthole.upgraded"

func isUpgraded(c echo.Context) bool { v, _ := c.Get(upgradedKey).(bool); return v }
