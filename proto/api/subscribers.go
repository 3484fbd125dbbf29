package api

import (
	"time"

	"routerd.dev/proto/event"
)

// The subscribers service (Document 2: plans; clients and fibre services
// to come).

// Plan is a speed plan as stored and answered.
type Plan struct {
	Name     string `json:"name" example:"gold"`
	DownMbps int64  `json:"down_mbps" example:"500"`
	UpMbps   int64  `json:"up_mbps" example:"100"`
	Comment  string `json:"comment"`
	Created  string `json:"created" example:"2026-11-24 10:00:00"`
}

// PlanListed is a plan in GET /plans, with how many MAC clients use it.
type PlanListed struct {
	Plan
	Clients int `json:"clients" doc:"MAC clients on the plan"`
}

// PlanList answers GET /plans.
type PlanList struct {
	Count int          `json:"count"`
	Plans []PlanListed `json:"plans"`
}

// PlanPut is POST /plans: create a plan or replace its rates and comment.
type PlanPut struct {
	Name     string `json:"name" api:"required" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"use 1-40 letters, digits, _ or -" example:"gold"`
	DownMbps int64  `json:"down_mbps" api:"required,min=1,max=100000" doc:"download rate, Mbit/s"`
	UpMbps   int64  `json:"up_mbps" api:"required,min=1,max=100000" doc:"upload rate, Mbit/s"`
	Comment  string `json:"comment" api:"maxlen=200" doc:"the limit is ours: the spec sets none"`
}

// PlanPutAnswer answers POST /plans.
type PlanPutAnswer struct {
	Result
	Plan Plan `json:"plan"`
	// OLT says how many OLTs are brought in step in the background; null
	// while no OLT is registered.
	OLT any `json:"olt" doc:"OLTs being brought in step, null while none is registered"`
}

// EventOf publishes plan.created or plan.updated with the plan.
func (a *PlanPutAnswer) EventOf() (string, any) {
	if a.Code == 200 {
		return event.PlanUpdated, a.Plan
	}
	return event.PlanCreated, a.Plan
}

// PlanRef names one plan (DELETE /plans/{name}, or the body's name).
type PlanRef struct {
	Name string `json:"name" api:"required" doc:"plan name; the path's or the body's"`
}

// PlanDeleteAnswer answers DELETE /plans.
type PlanDeleteAnswer struct {
	Result
	Plan Plan `json:"-"`
	OLT  any  `json:"olt" doc:"OLTs being brought in step, null while none is registered"`
}

// EventOf publishes plan.deleted with the plan that was removed.
func (a *PlanDeleteAnswer) EventOf() (string, any) { return event.PlanDeleted, a.Plan }

// ClientCounts are the client numbers GET /status shows.
type ClientCounts struct {
	Total int64 `json:"total"`
	// Online counts clients whose address is a live neighbour now.
	Online     int64            `json:"online"`
	PerNetwork map[string]int64 `json:"per_network"`
}

var (
	// PlansList is GET /plans.
	PlansList = Define[None, PlanList](Meta{
		Service: "subscribers", Name: "plans.list",
		Summary: "List plans, sorted by name, each with its client count. Any method other than POST and DELETE lists too.",
		REST:    []REST{{"GET", "/plans"}, {AnyMethod, "/plans"}}, Action: "plan-list", Read: true,
	})
	// PlansPut is POST /plans. New rates reshape every client of the plan
	// (the shaper's plans.rates, which may take its 2 minutes for a plan
	// held by 100,000 clients), and a reshape that fails is rolled back
	// within a minute more (plan.RollbackBudget): the default 15 s would
	// cut a big plan's reshape short.
	PlansPut = Define[PlanPut, PlanPutAnswer](Meta{
		Service: "subscribers", Name: "plans.put",
		Summary: "Create (201 'Plan created') or replace (200 'Plan updated') a plan; new rates reshape every client of the plan before the answer (up to 3 minutes for a plan of 100,000 clients). `olt` is null while no OLT is registered.",
		REST:    []REST{{"POST", "/plans"}}, Action: "plan-add", Status: 201,
		Event:   event.PlanCreated, // plan.updated for a replace
		Timeout: 3 * time.Minute,
	})
	// PlansDelete is DELETE /plans/{name} (or DELETE /plans with a body).
	PlansDelete = Define[PlanRef, PlanDeleteAnswer](Meta{
		Service: "subscribers", Name: "plans.delete",
		Summary: "Delete a plan; 404 when there is none of that name, 409 listing the MACs (`clients`) while clients use it.",
		REST:    []REST{{"DELETE", "/plans"}, {"DELETE", "/plans/{name}"}}, Action: "plan-del",
		Event: event.PlanDeleted,
	})
	// ClientsSummary gives GET /status its client counts.
	ClientsSummary = Define[None, ClientCounts](Meta{
		Service: "subscribers", Name: "clients.summary",
		Summary: "Client counts for GET /status.", Read: true,
	})
)

// PlansGet gives one plan to other services (the olt service resolves
// ont-add's plan with it); 404 when there is none of that name.
var PlansGet = Define[PlanRef, Plan](Meta{
	Service: "subscribers", Name: "plans.get",
	Summary: "One plan by name; 404 when none. Only services call it.", Read: true,
})
