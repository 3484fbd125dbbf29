package route

import (
	"errors"

	"routerd.dev/shared/apierr"
)

func fieldOf(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) {
		f, _ := e.Fields["field"].(string)
		return f
	}
	return ""
}
