// Returns the datasets that have a Calibration, newest first.
MATCH (c:Calibration)
RETURN c.dataset AS dataset, max(c.created) AS created ORDER BY created DESC
