"""Authentication and authorization: password hashing and the permission rules (wire §6.1-§6.2)."""
