local hs = {}
if string.find(obj.metadata.name, "agave") then
  hs.status = "Healthy"
else
  hs.status = "Degraded"
end
hs.message = "looked at the name"
return hs
