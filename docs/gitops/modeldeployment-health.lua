-- Argo CD health check for modelscale.dev/ModelDeployment (see docs/gitops.md).
-- Healthy: the operator has seen the current spec and at least minReplicas pods are
-- Ready (warmed up). Degraded: the operator reports a problem that needs a person.
-- Progressing: anything else (pods starting, warming up, a new spec not yet handled).
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the modelscale operator to report status"
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "The operator has not handled the latest spec yet"
  return hs
end
local available = nil
local degraded = nil
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Available" then available = c end
  if c.type == "Degraded" then degraded = c end
end
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = (degraded.reason or "Degraded") .. ": " .. (degraded.message or "")
  return hs
end
if available ~= nil and available.status == "True" then
  hs.status = "Healthy"
  hs.message = available.message or ""
  return hs
end
hs.status = "Progressing"
if available ~= nil and available.message ~= nil then
  hs.message = available.message
else
  hs.message = "Waiting for warmed replicas"
end
return hs
