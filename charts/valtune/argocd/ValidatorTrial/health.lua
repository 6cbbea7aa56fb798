-- Argo CD health of a valtune.dev/v1alpha1 ValidatorTrial.
-- Lua 5.1 base and table functions only: Argo CD runs argocd-cm health scripts with
-- gopher-lua v1.1.2 and without the string and math libraries (argo-cd v3.6.2
-- util/lua/lua.go). The status is what operator/src/controller/trial/ writes: phase
-- Pending|Scheduling|WarmingUp|Measuring|Collecting|Succeeded|Failed, an outcome once
-- finished, attempts (a retry after NodeLost or Unschedulable adds one), and the
-- conditions Ready (Succeeded: a measured outcome), Progressing, Degraded (Failed: no
-- measurement) and MetricsReadable (Prometheus answers).
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

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the valtune operator to start the trial"
  return hs
end
if status.observedGeneration == nil or status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the valtune operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

local ready = condition(status.conditions, "Ready")
local readable = condition(status.conditions, "MetricsReadable")
local phase = status.phase
local outcome = status.outcome or phase
local message = status.message

if phase == "Succeeded" and ready ~= nil and ready.status == "True" then
  -- KeptUp, FellBehind, OOMKilled and Aborted are all results; the operator's message
  -- starts with the outcome and sums the results up.
  hs.status = "Healthy"
  hs.message = message or outcome
  return hs
end
if phase == "Failed" then
  hs.status = "Degraded"
  hs.message = outcome
else
  hs.status = "Progressing"
  hs.message = phase
  local previous = status.previousAttempts
  if status.attempts ~= nil and status.attempts > 1 and previous ~= nil and #previous > 0 then
    hs.message = phase .. " (retrying: attempt " .. tostring(status.attempts) .. " after "
      .. previous[#previous].outcome .. ")"
  end
  if readable ~= nil and readable.status == "False" then
    hs.message = hs.message .. "; Prometheus unreachable"
  end
end
if message ~= nil and message ~= "" then
  hs.message = hs.message .. ": " .. message
end
return hs
