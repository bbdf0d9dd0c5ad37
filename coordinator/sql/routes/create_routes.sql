-- Creates the rows of routes seen for the first time. $1 routes.
INSERT INTO route_pauses (route)
SELECT unnest($1::text[])
ON CONFLICT (route) DO NOTHING
