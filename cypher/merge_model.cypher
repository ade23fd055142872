// Records a trained scorer as (:ScoringModel {id}) with its config and figures; returns nothing.
MERGE (m:ScoringModel {id: $id})
SET m += $props
