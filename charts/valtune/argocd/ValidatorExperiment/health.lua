-- Argo CD health of a valtune.dev/v1alpha1 ValidatorExperiment.
-- Lua 5.1 base and table functions only: Argo CD runs argocd-cm health scripts with
-- gopher-lua v1.1.2 and without the string and math libraries (argo-cd v3.6.2
-- util/lua/lua.go). The status is what operator/src/controller/experiment/summary.rs
-- writes: phase Pending|Running|Suspended|Succeeded|Failed and the conditions Ready
-- (Succeeded), Progressing (Pending or Running) and Degraded (a trial failed).
local hs = {}

local function condition(conditions, kind)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

-- Being deleted (Argo CD 3.6 reads deletionMessage only then: gitops-engine v3.6.2
-- pkg/health/health.go): the experiment's trials, and with them its results, are owned by
-- it and go too; foreground deletion, Argo CD's default, waits for them.
if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.deletionMessage = "Deleting the experiment, and with it its trials and their results"
  if obj.metadata.finalizers ~= nil and #obj.metadata.finalizers > 0 then
    hs.deletionMessage = hs.deletionMessage .. "; waiting for finalizers: " .. table.concat(obj.metadata.finalizers, ", ")
  end
  return hs
end

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the valtune operator to pick up the experiment"
  return hs
end
-- A spec edit the operator has not acted on yet: nothing in status describes it.
if status.observedGeneration == nil or status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the valtune operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

local ready = condition(status.conditions, "Ready")
local progressing = condition(status.conditions, "Progressing")
local degraded = condition(status.conditions, "Degraded")
local phase = status.phase

if phase == "Succeeded" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
  if status.recommendation ~= nil and status.recommendation.summary ~= nil then
    hs.message = hs.message .. "; recommendation: " .. status.recommendation.summary
  end
elseif phase == "Failed" then
  hs.status = "Degraded"
  if ready ~= nil then
    hs.message = ready.message
  end
elseif phase == "Suspended" then
  hs.status = "Suspended"
  if progressing ~= nil then
    hs.message = progressing.message
  end
else
  -- Pending, Running (trials running, or finishing while suspended), or Succeeded
  -- before its Ready condition says so.
  hs.status = "Progressing"
  if progressing ~= nil then
    hs.message = progressing.message
  end
  if degraded ~= nil and degraded.status == "True" then
    hs.message = (hs.message or "") .. "; " .. degraded.message
  end
end
if hs.message == nil then
  hs.message = "phase " .. phase
end
return hs
