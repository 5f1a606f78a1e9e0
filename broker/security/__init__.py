"""Who a connection is and what it may do: authentication (TLS, SASL) and authorization (ACLs)."""
