package api

// GraphOps are the traffic graphs' operations (the graph service;
// Document 1, Graphs). /services/{id}/graph is not served: fibre services
// do not exist in this product.
var GraphOps = []Operation{GraphGet, GraphOLTPort, GraphONT}

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

// GraphOLTPortRequest is GET /graph/oltport.
type GraphOLTPortRequest struct {
	OLT    string `json:"olt" api:"required" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"a registered OLT's name" doc:"registered OLT name"`
	Port   string `json:"port" api:"required" pattern:"^[0-9]{1,3}/[0-9]{1,3}(/[0-9]{1,3})?$" hint:"frame/slot/port, or frame/slot for a whole card" doc:"F/S/P for a port, F/S for the sum of a card's ports"`
	PON    *int   `json:"pon" api:"min=0,max=1" doc:"1 (default): a PON port; 0: an uplink port"`
	Period string `json:"period" api:"enum=hour|day|week|month|quarter|year|2years,default=day" doc:"as for /graph/{name}, and quarter: 92 days of 6-hour averages; 2years: 732 days of 2-day"`
}

// GraphONTRequest is GET /graph/ont.
type GraphONTRequest struct {
	OLT    string `json:"olt" api:"required" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"a registered OLT's name" doc:"registered OLT name"`
	Port   string `json:"port" api:"required" pattern:"^[0-9]{1,3}/[0-9]{1,3}/[0-9]{1,3}$" hint:"frame/slot/port" doc:"the ONT's PON port"`
	ONT    *int   `json:"ont" api:"required,min=0,max=255" doc:"ONT id on the port"`
	What   string `json:"what" api:"enum=traffic|errors,default=traffic" doc:"traffic: download (to the ONT) and upload in bits per second; errors: upstream and downstream error and dropped frames per second"`
	Period string `json:"period" api:"enum=hour|day|week|month|quarter|year|2years,default=day" doc:"as for /graph/oltport"`
}

var (
	// GraphOLTPort is GET /graph/oltport.
	GraphOLTPort = Define[GraphOLTPortRequest, GraphImage](Meta{
		Service: "graph", Name: "graph.oltport", REST: []REST{{"GET", "/graph/oltport"}}, Read: true,
		Summary: "A traffic graph (image/png) of an OLT's PON port (pon=1) or uplink port (pon=0), or of a card's ports summed (port F/S), from the OLT's own counters, read every minute from every registered OLT. 400 for bad parameters (naming the field); 404 {error} when the OLT, port or card has no samples yet; 500 when drawing failed. No action form.",
	})
	// GraphONT is GET /graph/ont.
	GraphONT = Define[GraphONTRequest, GraphImage](Meta{
		Service: "graph", Name: "graph.ont", REST: []REST{{"GET", "/graph/ont"}}, Read: true,
		Summary: "A graph (image/png) of one ONT's traffic (what=traffic) or error counters (what=errors) as its OLT counts them, read every minute from every registered OLT. 400 for bad parameters (naming the field); 404 {error} when the ONT has no samples yet; 500 when drawing failed. No action form.",
	})
)
