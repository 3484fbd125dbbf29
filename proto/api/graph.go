package api

// GraphOps are the traffic graphs' operations (the graph service;
// Document 1, Graphs).
var GraphOps = []Operation{}
