package olt_test

import "os"

var osStat = os.Stat
