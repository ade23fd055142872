// Returns the whole Calibration node $id (its scores included), or nothing.
MATCH (c:Calibration {id: $id})
RETURN c
