package app

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// auditPageSize is how many events one page of the audit log shows.
const auditPageSize = 50

// AuditPage reads the audit log: who opened which surface of which agent, in which mode, and
// every account and agent change. Admins see everything, others their own agents' events.
// Filters (user, agent, surface, time) live in the URL, so a filtered view can be linked.
type AuditPage struct {
	app.Compo

	ui      app.Context
	me      api.Me
	agents  []api.Agent
	events  []api.AuditEvent
	loaded  bool
	err     error
	more    bool    // a full page came: there may be older events
	pages   []int64 // the "before" of each page shown so far (0 = the newest), for "Newer"
	filters auditFilters
	busy    bool
}

// auditFilters are the page's filters, as typed (times as a datetime-local input gives them).
type auditFilters struct {
	User, Agent, Surface, Since, Until string
}

func (f auditFilters) query(before int64) string {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("user", f.User)
	set("agent", f.Agent)
	set("surface", f.Surface)
	set("since", localToRFC3339(f.Since))
	set("until", localToRFC3339(f.Until))
	q.Set("limit", strconv.Itoa(auditPageSize))
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	return q.Encode()
}

// localToRFC3339 turns a datetime-local value ("2026-05-01T09:30") into RFC 3339 in this
// device's zone; "" and unparsable values give "".
func localToRFC3339(v string) string {
	if v == "" {
		return ""
	}
	t, err := time.ParseInLocation("2006-01-02T15:04", v, time.Local)
	if err != nil {
		return ""
	}
	return t.Format(time.RFC3339)
}

// OnNav reads the filters from the URL and loads the first page.
func (p *AuditPage) OnNav(ctx app.Context) {
	p.ui = ctx
	ctx.Page().SetTitle("Audit log · Porthole")
	q := ctx.Page().URL().Query()
	p.filters = auditFilters{User: q.Get("user"), Agent: q.Get("agent"), Surface: q.Get("surface"), Since: q.Get("since"), Until: q.Get("until")}
	if app.IsServer {
		return
	}
	var me api.Me
	var agents []api.Agent
	load(ctx, func(c context.Context) (err error) {
		if me, err = currentUser(c); err != nil {
			return err
		}
		agents, err = apiClient.Agents(c)
		return err
	}, func(ctx app.Context, err error) {
		p.me, p.agents = me, agents
		if err != nil {
			p.err = err
		}
	})
	p.pages = []int64{0}
	p.fetch(0)
}

// fetch loads the page of events older than before (0: the newest).
func (p *AuditPage) fetch(before int64) {
	query := p.filters.query(before)
	var evs []api.AuditEvent
	p.busy = true
	load(p.ui, func(c context.Context) (err error) {
		evs, err = apiClient.Audit(c, query)
		return err
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.events, p.loaded, p.more = evs, true, len(evs) == auditPageSize
		}
	})
}

func (p *AuditPage) apply(ctx app.Context, e app.Event) {
	e.PreventDefault()
	q := p.filters.query(0)
	// The address bar keeps the filters (without the page size), so the view can be linked.
	v, _ := url.ParseQuery(q)
	v.Del("limit")
	if p.filters.Since != "" {
		v.Set("since", p.filters.Since)
	}
	if p.filters.Until != "" {
		v.Set("until", p.filters.Until)
	}
	replaceURL("/audit?" + v.Encode())
	p.pages = []int64{0}
	p.fetch(0)
}

func (p *AuditPage) clearFilters(ctx app.Context, e app.Event) {
	p.filters = auditFilters{}
	replaceURL("/audit")
	p.pages = []int64{0}
	p.fetch(0)
}

func (p *AuditPage) older(ctx app.Context, e app.Event) {
	if len(p.events) == 0 {
		return
	}
	before := p.events[len(p.events)-1].ID
	p.pages = append(p.pages, before)
	p.fetch(before)
}

func (p *AuditPage) newer(ctx app.Context, e app.Event) {
	if len(p.pages) < 2 {
		return
	}
	p.pages = p.pages[:len(p.pages)-1]
	p.fetch(p.pages[len(p.pages)-1])
}

func (p *AuditPage) agentName(id string) string {
	for _, a := range p.agents {
		if a.ID == id {
			return a.Name
		}
	}
	if id == "" {
		return ""
	}
	return id // a deleted agent: its id
}

// Render draws the filters, the events and the paging.
func (p *AuditPage) Render() app.UI {
	agentOpts := []app.UI{app.Option().Value("").Selected(p.filters.Agent == "").Text("any agent")}
	for _, a := range p.agents {
		agentOpts = append(agentOpts, app.Option().Value(a.ID).Selected(a.ID == p.filters.Agent).Text(a.Name))
	}
	surfaceOpts := []app.UI{app.Option().Value("").Selected(p.filters.Surface == "").Text("any surface")}
	for _, s := range api.Surfaces {
		surfaceOpts = append(surfaceOpts, app.Option().Value(string(s)).Selected(string(s) == p.filters.Surface).Text(surfaceTitle(s)))
	}
	scope := "Events of the agents you own."
	if p.me.Admin {
		scope = "Every event on this server."
	}
	return app.Div().Class("page").Body(
		&TopBar{Active: "audit"},
		app.Main().Class("content").Body(
			app.H1().Text("Audit log"),
			app.P().Class("muted").Text(scope+" Newest first."),
			app.Form().ID("audit-filters").Class("card", "filters").OnSubmit(p.apply).Body(
				app.Div().Class("field").Body(
					app.Label().For("audit-user").Text("User"),
					app.Input().ID("audit-user").Type("text").Placeholder("username or token:ID").Attr("autocomplete", "off").
						Attr("autocapitalize", "none").Value(p.filters.User).OnInput(p.ValueTo(&p.filters.User)),
				),
				app.Div().Class("field").Body(
					app.Label().For("audit-agent").Text("Agent"),
					app.Select().ID("audit-agent").OnChange(p.ValueTo(&p.filters.Agent)).Body(agentOpts...),
				),
				app.Div().Class("field").Body(
					app.Label().For("audit-surface").Text("Surface"),
					app.Select().ID("audit-surface").OnChange(p.ValueTo(&p.filters.Surface)).Body(surfaceOpts...),
				),
				app.Div().Class("field").Body(
					app.Label().For("audit-since").Text("From"),
					app.Input().ID("audit-since").Type("datetime-local").Value(p.filters.Since).OnChange(p.ValueTo(&p.filters.Since)),
				),
				app.Div().Class("field").Body(
					app.Label().For("audit-until").Text("Until"),
					app.Input().ID("audit-until").Type("datetime-local").Value(p.filters.Until).OnChange(p.ValueTo(&p.filters.Until)),
				),
				app.Div().Class("form-actions").Body(
					app.Button().ID("audit-apply").Type("submit").Class("primary").Text("Show"),
					app.Button().ID("audit-clear").Type("button").Class("ghost").OnClick(p.clearFilters).Text("Clear filters"),
				),
			),
			errorText(p.err),
			app.If(!p.loaded && p.err == nil, loading),
			app.If(p.loaded, p.renderEvents),
		),
	)
}

func (p *AuditPage) renderEvents() app.UI {
	if len(p.events) == 0 {
		return app.P().ID("audit-empty").Class("empty").Text("No events match these filters.")
	}
	rows := make([]app.UI, len(p.events))
	for i, e := range p.events {
		actor := e.Actor
		if actor == "" {
			actor = "(not logged in)"
		}
		rows[i] = app.Tr().DataSet("event-id", e.ID).Body(
			app.Td().DataSet("label", "When").Class("nowrap").Text(e.Time.Local().Format("2006-01-02 15:04:05")),
			app.Td().DataSet("label", "Who").Class("audit-actor").Text(actor),
			app.Td().DataSet("label", "What").Class("audit-action").Text(e.Action),
			app.Td().DataSet("label", "Agent").Class("audit-agent").Text(p.agentName(e.AgentID)),
			app.Td().DataSet("label", "Surface").Class("audit-surface").Text(string(e.Surface)+modeSuffix(e.Mode)),
			app.Td().DataSet("label", "Detail").Class("audit-detail").Text(e.Detail),
			app.Td().DataSet("label", "From").Class("muted").Text(e.Remote),
		)
	}
	return app.Div().Body(
		app.Div().Class("table-wrap").Body(
			app.Table().ID("audit-table").Class("users", "audit").Body(
				app.THead().Body(app.Tr().Body(
					app.Th().Text("When"), app.Th().Text("Who"), app.Th().Text("What"), app.Th().Text("Agent"),
					app.Th().Text("Surface"), app.Th().Text("Detail"), app.Th().Text("From"),
				)),
				app.TBody().Body(rows...),
			),
		),
		app.Div().Class("form-actions", "pager").Body(
			app.Button().ID("audit-newer").Type("button").Class("ghost").Disabled(p.busy || len(p.pages) < 2).OnClick(p.newer).Text("← Newer"),
			app.Span().Class("muted").Text("Page "+strconv.Itoa(len(p.pages))),
			app.Button().ID("audit-older").Type("button").Class("ghost").Disabled(p.busy || !p.more).OnClick(p.older).Text("Older →"),
		),
	)
}

func modeSuffix(m api.Level) string {
	if m == "" {
		return ""
	}
	return " (" + string(m) + ")"
}
