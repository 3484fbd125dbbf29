package proto

// Banner is the fixed usage banner in the `api` field of GET /status and of
// the usage summary; it names the API version.
const Banner = "routerd Router Management API v1.0"
