package api

// GraphOps are the traffic graphs' operations (the graph service;
// Document 1, Graphs). /graph/oltport, /graph/ont and /services/{id}/graph
// are not served yet (no OLT samples are taken, and fibre services do not
// exist in this product).
var GraphOps = []Operation{GraphGet}

// GraphRequest is GET /graph/{name}.
type GraphRequest struct {
	Name   string `json:"name" api:"required,maxlen=64" doc:"an interface of the router (as GET /interfaces names it) or a shaped client's MAC (any usual format); a service id (svc_ plus 8 hex digits) is 404 until fibre services exist"`
	Period string `json:"period" api:"enum=hour|day|week|month|year,default=day" doc:"hour: the last 3 hours of 1-minute samples; day: 24 hours of 5-minute averages; week: 7 days of 30-minute; month: 31 days of 2-hour; year: 366 days of 1-day (averages, and maxima in the legend)"`
}

// GraphImage documents GET /graph/{name}'s answer: not JSON but a PNG.
type GraphImage struct {
	Image string `json:"-" doc:"image/png, 704x300: in (green area) and out (blue line) in bits per second, for a client download (to it) and upload (from it); title naming the series and period; legend with current, average and maximum"`
}

// GraphGet is GET /graph/{name}.
var GraphGet = Define[GraphRequest, GraphImage](Meta{
	Service: "graph", Name: "graph.get", REST: []REST{{"GET", "/graph/{name}"}}, Read: true,
	Summary: "A traffic graph (image/png) of an interface or a client over a period. 400 naming `period` when it is not hour, day, week, month or year; 404 {error} for an unknown name or when no sample has been taken yet (samples are collected every minute); 500 when drawing failed. No action form.",
})
