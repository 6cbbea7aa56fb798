-- Argo CD health of a valtune.dev/v1alpha1 Validator.
-- Lua 5.1 base and table functions only: Argo CD runs argocd-cm health scripts with
-- gopher-lua v1.1.2 and without the string and math libraries (argo-cd v3.6.2
-- util/lua/lua.go). The status is what operator/src/controller/validator/ writes: phase
-- Starting|CatchingUp|Running|RestartPending|Restarting|Standby|Failed, the client's
-- health answer verbatim, the lag, a pending change and why it waits, and the conditions
-- Ready, CaughtUp, IdentityHeld and RestartPending.
-- Catching up is Progressing, never Degraded: a validator loading a snapshot or
-- replaying is doing what it should. An identity another Validator holds is Degraded:
-- it will not start until someone acts. A failover pair member whose partner holds the
-- staked identity (IdentityHeld False, reason Spare) is not: it runs, a hot spare.
-- TuningApplied False: an experiment's point waiting for the restart window is
-- Progressing (the phase is RestartPending then: the pod runs the old tuning until the
-- window opens). A refused point (the experiment still running, another client,
-- version or node class) is Healthy with the reason in the message: the validator runs
-- its template as written and validates; Degraded would page and block sync waves for
-- what is no outage, and for days while the experiment runs. The refusal has its
-- condition and a warning event.
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
  hs.message = "Waiting for the valtune operator to start the validator"
  return hs
end
if status.observedGeneration == nil or status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the valtune operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

local phase = status.phase
local ready = condition(status.conditions, "Ready")
local identity = condition(status.conditions, "IdentityHeld")
local tuning = condition(status.conditions, "TuningApplied")

-- A failover pair member whose partner holds the staked identity (reason Spare) is a
-- hot spare doing what it should, not a conflict.
if identity ~= nil and identity.status == "False" and identity.reason ~= "Spare" then
  hs.status = "Degraded"
  hs.message = "IdentityHeld: " .. (identity.message or identity.reason or "")
  return hs
end
if phase == "Failed" then
  hs.status = "Degraded"
  hs.message = "Failed"
  if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
    hs.message = "Failed: " .. ready.message
  end
  return hs
end

local function lag()
  if status.lag == nil then
    return ""
  end
  return " (" .. tostring(status.lag) .. " behind)"
end

if phase == "Running" or phase == "Standby" then
  if ready ~= nil and ready.status == "True" then
    hs.status = "Healthy"
    hs.message = phase
    if status.health ~= nil then
      hs.message = phase .. ": " .. status.health
    end
    if tuning ~= nil and tuning.status == "False" then
      if tuning.reason == "WaitingForRestart" then
        hs.status = "Progressing"
      end
      hs.message = hs.message .. "; TuningApplied False (" .. (tuning.reason or "") .. "): " .. (tuning.message or "")
    end
    return hs
  end
  -- It was caught up and the client now says otherwise.
  hs.status = "Degraded"
  hs.message = phase .. ": not ready" .. lag()
  if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
    hs.message = phase .. ": " .. ready.message .. lag()
  end
  return hs
end

-- Starting, CatchingUp, RestartPending, Restarting: on its way.
hs.status = "Progressing"
hs.message = phase .. lag()
if phase == "RestartPending" and status.pendingChange ~= nil then
  hs.message = "RestartPending: " .. status.pendingChange.waitingFor
elseif status.health ~= nil then
  hs.message = phase .. ": " .. status.health .. lag()
end
return hs
