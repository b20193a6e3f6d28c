//go:build !js

package app

import (
	"regexp"
	"strings"
	"testing"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/browser"
)

// tabsDriver is a bvDriver that only lists tabs.
type tabsDriver struct {
	bvDriver
	tabs []browser.TabInfo
}

func (d tabsDriver) tabList() []browser.TabInfo { return d.tabs }

// TestBrowserTabFavicons: a tab's favicon is a decorative <img> only when it is a PNG data URL;
// any other string from the agent (a URL of its site, script, markup) is no icon and no HTML.
func TestBrowserTabFavicons(t *testing.T) {
	const icon = browser.FaviconPrefix + "iVBORw0KGgo="
	for _, c := range []struct {
		favicon string
		img     bool
	}{
		{icon, true},
		{"", false},
		{"https://agent.example/favicon.ico", false},
		{"data:image/svg+xml;base64,PHN2Zz4=", false},
		{"javascript:alert(1)", false},
		{`"><script>alert(1)</script>`, false},
		{" " + icon, false},
	} {
		p := &BrowserPanel{AgentID: "a1", sess: tabsDriver{tabs: []browser.TabInfo{{ID: "T1", Title: "a <b>tab</b>", URL: "https://agent.example/", Favicon: c.favicon, Active: true}}}}
		html := app.HTMLString(p.renderTabs())
		hasImg := strings.Contains(html, "<img")
		if hasImg != c.img {
			t.Errorf("renderTabs(favicon %q) has an <img> = %v, want %v:\n%s", c.favicon, hasImg, c.img, html)
		}
		if c.img && (!strings.Contains(html, `src="`+icon+`"`) || !emptyAlt.MatchString(html)) {
			t.Errorf("renderTabs(favicon %q) = %s, want a decorative <img src=the data URL>", c.favicon, html)
		}
		if strings.Contains(html, "<script") || strings.Contains(html, "<b>") {
			t.Errorf("renderTabs(favicon %q): the agent's strings became HTML:\n%s", c.favicon, html)
		}
	}
}

// emptyAlt matches an empty alt attribute, rendered as alt or alt="", wherever it stands.
var emptyAlt = regexp.MustCompile(`<img[^>]*\salt(=""|[\s>])`)
